# frozen_string_literal: true

# README's quantitative promises are checked as its examples are: each names the spec that tries to break it
# (CONTRIBUTING.md's rule), and every spec README names exists, so a renamed spec cannot leave a promise
# pointing at nothing.
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

  it "names only specs that exist" do
    named = readme.scan(%r{spec/[\w/]+_spec\.rb}).uniq
    expect(named.reject { |path| File.exist?(File.expand_path("../../#{path}", __dir__)) }).to eq([])
  end
end
