# frozen_string_literal: true

# README's quantitative promises are checked as its examples are: each names the spec that tries to break it
# (CONTRIBUTING.md's rule), and every spec README or docs/ names exists, so a renamed spec cannot leave a
# promise pointing at nothing.
RSpec.describe "README.md's promises" do
  readme = File.read(File.expand_path("../../README.md", __dir__))
  # Paragraphs and list items: a promise and the spec it names are written together.
  blocks = readme.split(/\n(?=\n|- |\*\*)/)
  promises = {
    "close is bounded by its timeout" => "is bounded by its `timeout:`",
    "a slow listener delays other clients by at most max_time" => "by at most `max_time` per turn",
    "secrets stay secret" => "**Secrets stay secret.**",
    "a token endpoint that never answers holds up no delivery" => "a token endpoint that never answers"
  }

  promises.each do |promise, words|
    it "names the spec of its promise that #{promise}" do
      block = blocks.find { |text| text.include?(words) }
      expect(block).not_to be_nil, "README.md no longer says #{words.inspect}"
      expect(block).to match(%r{`spec/[\w/]+_spec\.rb`})
    end
  end

  it "names only specs that exist, in README.md and in docs/ (where its details moved)" do
    docs = Dir[File.expand_path("../../docs/*.md", __dir__)].map { |path| File.read(path) }
    named = [readme, *docs].flat_map { |text| text.scan(%r{spec/[\w/]+_spec\.rb}) }.uniq
    expect(named.reject { |path| File.exist?(File.expand_path("../../#{path}", __dir__)) }).to eq([])
  end

  # CONTRIBUTING.md's rule: README is usage, guarantees and limitations; figures, CI and internals
  # live in docs/. A line budget keeps it from regrowing one paragraph at a time.
  it "stays within 350 lines" do
    expect(readme.lines.size).to be <= 350
  end
end
