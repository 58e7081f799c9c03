# frozen_string_literal: true

require "digest"
require "open3"
require "tsort"

# The native code's call graph has no circle (issue 45): a file calls only files below it, so each can be read,
# changed and tested from the bottom up. Read from the compiled objects (`nm`), not the sources: a symbol an object
# uses and another defines is an edge, whatever macro or header made it. A new circle fails here; the circles still
# allowed are named below with their reason. No broker. Skipped where the objects are not at hand (an installed gem).
RSpec.describe "The call graph of the native code (ext/sluice)" do
  root = File.expand_path("../..", __dir__)
  loaded = File.join(root, "lib/sluice", "sluice_ext.#{RbConfig::CONFIG.fetch("DLEXT")}")
  sources = Dir[File.join(root, "ext/sluice/*.c")].map { |path| File.basename(path, ".c") }.sort

  # Circles (strongly connected components of more than one file) that remain, each with why.
  allowed = {}.freeze

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

  graph = lambda do |table|
    owner = table.flat_map { |file, (defined, _)| defined.map { |sym| [sym, file] } }.to_h
    table.to_h { |file, (_, used)| [file, used.filter_map { |sym| owner[sym] }.uniq - [file]] }
  end

  circles = lambda do |edges|
    each_node = ->(&block) { edges.each_key(&block) }
    each_child = ->(node, &block) { edges.fetch(node).each(&block) }
    TSort.strongly_connected_components(each_node, each_child).select { |scc| scc.size > 1 }.map(&:sort).sort
  end

  it "has no circle but the allowed ones" do
    skip "no nm on this system" unless ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).any? { |bin| File.executable?(File.join(bin, "nm")) }
    dir = build_dir.call
    skip "no build directory holds the loaded extension's objects (rake compile builds them; a gem install has none)" unless dir
    missing = sources.reject { |name| File.file?(File.join(dir, "#{name}.o")) }
    skip "the build in #{dir} lacks #{missing.join(", ")}.o: rake compile" unless missing.empty?

    found = circles.call(graph.call(symbols.call(dir)))
    expect(found).to eq(allowed.keys.map(&:sort).sort),
                     "circles in ext/sluice's call graph: #{found.map { |scc| scc.join(" ") }.join("; ")}"
  end
end
