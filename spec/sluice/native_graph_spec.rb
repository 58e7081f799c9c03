# frozen_string_literal: true

require "digest"
require "open3"
require "tsort"

# The native code's call graph has no circle (issue 45): a file calls only files below it, so each can be read,
# changed and tested from the bottom up. Read from the compiled objects (`nm`), not the sources: a symbol an object
# uses and another defines is an edge, whatever macro or header made it. nm does not see an inline function of a
# header (each caller compiles its own copy), so those calls are read from the sources (issue 59): an inline is code
# of the file that defines what its header declares (common.h's sluice_forked: common.c's), or of the file of the
# header's name when the header declares nothing defined here (produce.h's sluice_producer_of: produce.c's); a
# header is named for that file, so the name tells where its inlines belong. A new circle fails here; the circles
# still allowed are named below with their reason. No broker. Skipped where the objects are not at hand (a gem).
RSpec.describe "The call graph of the native code (ext/sluice)" do
  root = File.expand_path("../..", __dir__)
  loaded = File.join(root, "lib/sluice", "sluice_ext.#{RbConfig::CONFIG.fetch("DLEXT")}")
  sources = Dir[File.join(root, "ext/sluice/*.c")].map { |path| File.basename(path, ".c") }.sort
  headers = Dir[File.join(root, "ext/sluice/*.h")].map { |path| File.basename(path, ".h") }.sort

  # Circles (strongly connected components of more than one file) that remain, each with why.
  allowed = {}.freeze
  # Headers that declare what a file of another name defines, each with why.
  named_otherwise = {
    "selector" => "the backends' interface: what the backend built defines (sluice_backend_*) and the helpers it shares " \
                  "with selector.c, which includes it to call the backend (selector.c's own is only its init, init.h)"
  }.freeze

  # The build directory of the extension that is loaded: rake compile builds under tmp/build/<flavour>/ and copies
  # the library into lib/sluice, so the one whose library is that copy holds its objects.
  build_dir = lambda do
    return nil unless File.file?(loaded)

    digest = Digest::SHA256.file(loaded)
    Dir[File.join(root, "tmp/build/*/*/sluice_ext/#{RUBY_VERSION}/sluice_ext.*")]
      .find { |library| File.file?(library) && Digest::SHA256.file(library) == digest }&.then { |library| File.dirname(library) }
  end

  # { "file" => [[defined...], [used...]] } from `nm -P` (POSIX format: name, type, ...).
  symbols = lambda do |dir|
    sources.to_h do |name|
      out, status = Open3.capture2("nm", "-P", File.join(dir, "#{name}.o"))
      raise "nm failed on #{name}.o" unless status.success?

      rows = out.lines.map(&:split)
      [name, [rows.filter_map { |sym, type| sym if type.match?(/\A[A-TV-Z]\z/) }, rows.filter_map { |sym, type| sym if type == "U" }]]
    end
  end

  owners = ->(table) { table.flat_map { |file, (defined, _)| defined.map { |sym| [sym.delete_prefix("_"), file] } }.to_h }

  graph = lambda do |table|
    owner = table.flat_map { |file, (defined, _)| defined.map { |sym| [sym, file] } }.to_h
    table.to_h { |file, (_, used)| [file, used.filter_map { |sym| owner[sym] }.uniq - [file]] }
  end

  # C without its comments; the `static inline` functions of a header: [names, the text without their bodies].
  code = ->(path) { File.read(path).gsub(%r{/\*.*?\*/}m, "").gsub(%r{//[^\n]*}, "") }
  inlines = lambda do |text|
    names = []
    rest = +""
    pos = 0
    while (match = /static inline\b[^;{]*?\b(\w+)\s*\([^;{]*\)\s*\{/.match(text, pos))
      names << match[1]
      rest << text[pos...match.begin(0)]
      depth = 0
      pos = match.end(0) - 1
      loop do
        depth += { "{" => 1, "}" => -1 }.fetch(text[pos], 0)
        pos += 1
        break if depth.zero?
      end
    end
    [names, rest << text[pos..]]
  end

  # { "header" => [inline names, files defining what it declares] }
  declared = lambda do |table|
    owner = owners.call(table)
    headers.to_h do |name|
      names, rest = inlines.call(code.call(File.join(root, "ext/sluice/#{name}.h")))
      [name, [names, rest.scan(/\b\w+\b/).uniq.filter_map { |word| owner[word] }.uniq.sort]]
    end
  end

  # { "file" => [files whose inlines it calls] }; a file compiled to nothing (another system's backend) calls none.
  inline_calls = lambda do |table|
    belongs = declared.call(table).flat_map do |name, (names, files)|
      files = [name] if files.empty? && sources.include?(name)
      names.map { |inline| [inline, files] }
    end
    sources.to_h do |name|
      words = table.fetch(name).flatten.empty? ? [] : code.call(File.join(root, "ext/sluice/#{name}.c")).scan(/\b\w+\b/).uniq
      [name, belongs.select { |inline, _| words.include?(inline) }.flat_map(&:last).uniq - [name]]
    end
  end

  circles = lambda do |edges|
    each_node = ->(&block) { edges.each_key(&block) }
    each_child = ->(node, &block) { edges.fetch(node).each(&block) }
    TSort.strongly_connected_components(each_node, each_child).select { |scc| scc.size > 1 }.map(&:sort).sort
  end

  # Called with instance_exec: a skip here must be the example's, not the group's (which would
  # define a skipped example and carry on with no build directory).
  objects = lambda do
    skip "no nm on this system" unless ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).any? { |bin| File.executable?(File.join(bin, "nm")) }
    dir = build_dir.call
    skip "no build directory holds the loaded extension's objects (rake compile builds them; a gem install has none)" unless dir
    missing = sources.reject { |name| File.file?(File.join(dir, "#{name}.o")) }
    skip "the build in #{dir} lacks #{missing.join(", ")}.o: rake compile" unless missing.empty?

    symbols.call(dir)
  end

  it "has no circle but the allowed ones, calls of a header's inline functions included" do
    table = instance_exec(&objects)
    edges = graph.call(table).merge(inline_calls.call(table)) { |_, linked, inlined| (linked + inlined).uniq }
    found = circles.call(edges)
    expect(found).to eq(allowed.keys.map(&:sort).sort),
                     "circles in ext/sluice's call graph: #{found.map { |scc| scc.join(" ") }.join("; ")}"
  end

  it "names each header for the file that defines what it declares, so its inlines are that file's" do
    misnamed = declared.call(instance_exec(&objects)).reject do |name, (_, files)|
      files.empty? || files.include?(name) || !sources.include?(name) || named_otherwise.key?(name)
    end
    expect(misnamed.transform_values(&:last)).to eq({})
  end

  it "excuses only headers still named otherwise" do
    files = declared.call(instance_exec(&objects)).transform_values(&:last)
    expect(named_otherwise.keys.select { |name| files.fetch(name, [name]).include?(name) }).to eq([])
  end
end
