# frozen_string_literal: true

# ext/sluice/README.md is the one map of the native code (issue 45): what each file owns, and every class,
# module and method the extension defines, with the file that defines it. This spec keeps it true, and keeps
# every file path a comment names pointing at a file that exists, so a reader sent somewhere finds it.
# No broker: it reads the sources (git's view of them) and asks the loaded extension.
# git's list of the sources, or nil where there is no git or no repository (bin/test-root's Debian roots
# have neither: the map is checked on the host, by bin/test).
tracked = begin
  listing = IO.popen(%w[git ls-files -z], chdir: File.expand_path("../..", __dir__), err: File::NULL, &:read)
  listing.split("\0") if $?.success? && !listing.empty? # rubocop:disable Style/SpecialGlobalVars
rescue SystemCallError
  nil
end

unless tracked
  RSpec.describe "The map of the native code (ext/sluice/README.md)" do
    it("is checked where git lists the sources") { skip "no git or no repository here: bin/test checks the map on the host" }
  end
  return
end

RSpec.describe "The map of the native code (ext/sluice/README.md)" do
  root = File.expand_path("../..", __dir__)
  map_text = File.read(File.join(root, "ext/sluice/README.md"))
  c_sources = tracked.grep(%r{\Aext/sluice/[^/]+\.c\z}).to_h { |path| [File.basename(path), File.read(File.join(root, path))] }

  # C source without its comments: a comment that quotes an rb_define_* call is no definition.
  strip_comments = ->(source) { source.gsub(%r{/\*.*?\*/}m, "").gsub(%r{//[^\n]*}, "") }
  # A receiver may itself be a call (rb_define_module_under(sluice_mNative, "Handoff")): one level of parentheses.
  receiver = /(?:[^,()]|\([^()]*\))+/

  # [kind, name, file] for every method the C defines: "#" an instance method, "." a singleton method or module
  # function; initialize is ".new", as the map writes it.
  kind_of = ->(how, name) { how == "method" && name != "initialize" ? "#" : "." }
  code_methods = c_sources.flat_map do |file, source|
    definitions = strip_comments.call(source).scan(/rb_define_(method|singleton_method|module_function)\(\s*#{receiver},\s*"([^"]+)"/)
    definitions.map { |how, name| [kind_of.call(how, name), name == "initialize" ? "new" : name, file] }
  end
  # Methods defined only when the librdkafka built against has what they need (`#if` around the definition):
  # a build against an older system librdkafka lacks them, and the pinned one those of a newer release
  # (`#if RD_KAFKA_VERSION >= 0x020f0000`: the share consumer, librdkafka 2.15.0's).
  linked = Sluice::Native.librdkafka_version
  conditional = c_sources.flat_map do |_file, source|
    strip_comments.call(source).scan(/^#if([^\n]*)\n((?:(?!#endif)[^\n]*\n)*?)#endif/).flat_map do |condition, block|
      needs = condition[/RD_KAFKA_VERSION >= 0x(\h{8})/, 1]&.then { |hex| hex.scan(/\h\h/).first(3).map { |part| part.to_i(16) }.join(".") }
      next [] if linked == Sluice::LIBRDKAFKA[:version] && !(needs && Gem::Version.new(linked) < Gem::Version.new(needs))

      block.scan(/rb_define_\w+\(\s*#{receiver},\s*"([^"]+)"/).flatten.map { |name| name == "initialize" ? "new" : name }
    end
  end
  # The classes and modules the C defines (the last part of the name), with their file.
  code_constants = c_sources.flat_map do |file, source|
    definitions = strip_comments.call(source).scan(/rb_(?:define_class_under|define_module_under|struct_define_under)\(\s*#{receiver},\s*"(\w+)"/)
    definitions.map { |(name)| [name, file] }
  end

  # The map's headings and rows (its "Keeping this map true" section says how it is read).
  map_constants = []
  map_methods = []
  heading = nil
  map_text.each_line do |line|
    if (match = line.match(/\A### `([\w:]+)[^`]*` \(([^)]*)\)/))
      heading = { name: match[1], file: match[2][/[\w.]+\.c/] }
      map_constants << [match[1].split("::").last, heading[:file], match[1]]
    elsif line.start_with?("## ")
      heading = nil
    elsif heading && line.start_with?("| `")
      cell = line.split("|")[1]
      file = cell[/\(([\w.]+\.c)\)\s*\z/, 1] || heading[:file]
      cell.scan(/`([#.])(\w+[?!=]?)/).each { |kind, name| map_methods << [kind, name, file, heading[:name]] }
    end
  end
  files_table = map_text[/^## Files\n.*?(?=^## )/m]

  it "reads some of each, so an empty match cannot pass" do
    expect([code_methods.size, code_constants.size, map_methods.size, map_constants.size]).to all(be > 5)
  end

  it "lists every method the C defines, under the file that defines it, and nothing more" do
    expect(map_methods.map { |method| method.first(3) }).to match_array(code_methods)
  end

  it "names, for every class and module the C defines, the file that defines it" do
    expect(map_constants.map { |constant| constant.first(2) }).to match_array(code_constants)
  end

  it "lists only methods that the loaded extension has, on the class or module its heading names" do
    missing = map_methods.reject do |kind, name, _file, owner|
      target = Object.const_get(owner)
      next true if conditional.include?(name)

      if kind == "#"
        target.method_defined?(name, false) || target.private_method_defined?(name, false)
      elsif name == "new"
        target.private_method_defined?(:initialize, false)
      else
        target.singleton_methods(false).include?(name.to_sym)
      end
    end
    expect(missing.map { |kind, name, _file, owner| "#{owner}#{kind}#{name}" }).to eq([])
  end

  it "lists every file of ext/sluice in its Files table, and only files that exist" do
    entries = tracked.grep(%r{\Aext/sluice/}).map { |path| path.delete_prefix("ext/sluice/").sub(%r{/.*}, "/") }.uniq
    listed = files_table.lines.grep(/\A\| `/).flat_map { |row| row.split("|")[1].scan(%r{`([\w.]+(?:\.(?:c|h|rb)|/))`}).flatten }
    expect(entries - ["README.md"]).to match_array(listed)
  end

  # Paths comments name that are no file of this repository, each for a reason.
  elsewhere = {
    "tmp/soak.json" => "bin/soak writes it", "tmp/soak.png" => "bin/soak writes it",
    "tmp/rspec-cluster-fd.json" => "bin/test-cluster writes it", "tmp/rspec-cluster-thread.json" => "bin/test-cluster writes it",
    "tmp/soak-ci.json" => "bin/test-cluster writes it", "tmp/toxiproxy-restarts.txt" => "bin/test-cluster writes it",
    "tmp/rspec-kafka4-VERSION-PROTOCOL.json" => "bin/test-kafka4 writes it (a pattern)",
    "tmp/rspec-root-SUITE.json" => "bin/test-root writes it (a pattern)", "tmp/upgrade.json" => "bin/test-upgrade writes it",
    "toxiproxy.json" => "bin/kafka writes it, under tmp/kafka/toxiproxy/",
    "krb5.conf" => "a Kerberos realm's (KAFKA_KERBEROS; spec/support/kerberos.rb makes one)",
    "block.rb" => "the file spec/integration/docs/code_blocks_spec.rb writes a code block to",
    "forwarder_spec.rb" => "the name spec/sluice/testing/no_broker_spec.rb copies a scenario to",
    "resolv.conf" => "the system's, /etc/resolv.conf", "check_pf.c" => "glibc's source",
    "kafka-topics.sh" => "Kafka's tools", "kafka-consumer-groups.sh" => "Kafka's tools",
    "kafka-share-groups.sh" => "Kafka's tools",
    "kafka-producer-perf-test.sh" => "Kafka's tools", "rbinstall.rb" => "Ruby's source (tool/rbinstall.rb)",
    "include/makemd5.c" => "Cyrus SASL's source", "common/crypto-compat.c" => "Cyrus SASL's source",
    "rdkafka_conf.c" => "librdkafka's source", "rdkafka_mock_cgrp.c" => "librdkafka's source",
    "OUT.json" => "bin/rspec-parallel's usage (a placeholder)"
  }
  extensions = "rb|c|h|md|rake|ya?ml|json|sh|txt|patch|gemspec|png|conf"
  path = %r{(?<![\w/.\{-])((?:[\w.\{\},-]+/)*[\w\{\},-]+\.(?:#{extensions}))(?![\w/-])}
  # instrumentation/{prometheus,statsd}_listener_spec.rb names two files.
  expand = lambda do |name|
    head, choices, tail = name.match(/\A(.*?)\{([^}]*)\}(.*)\z/)&.captures
    choices ? choices.split(",").flat_map { |choice| expand.call("#{head}#{choice}#{tail}") } : [name]
  end
  comments = lambda do |file, text|
    if file.end_with?(".c", ".h")
      text.scan(%r{/\*.*?\*/|//[^\n]*}m)
    else
      text.each_line.filter_map { |line| line[/(?:\A|\s)#(?![{!]).*/] }
    end
  end
  named = Hash.new { |hash, key| hash[key] = [] }
  tracked.grep(%r{\A(?:lib/|bin/|spec/|ext/sluice/[^/]+\.[ch]\z)}).each do |file|
    text = File.read(File.join(root, file), encoding: "UTF-8")
    next unless text.valid_encoding? && !text.include?("\0")

    comments.call(file, text).join("\n").scan(path).flatten.flat_map(&expand).each { |name| named[name] << file }
  end
  exists = ->(name) { tracked.any? { |file| file == name || file.end_with?("/#{name}") } }

  it "sends a comment's reader only to files that exist in git (or are made at run time, or are another project's)" do
    dangling = named.reject { |name, _| exists.call(name) || elsewhere.key?(name) }
    expect(dangling.transform_values(&:uniq)).to eq({})
  end

  it "excuses only paths a comment still names and git does not have" do
    expect(elsewhere.keys.reject { |name| named.key?(name) && !exists.call(name) }).to eq([])
  end
end
