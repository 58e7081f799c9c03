# frozen_string_literal: true

require_relative "../axes"

RSpec.describe SpecAxes do
  it "names only spec files that exist: a renamed or removed file cannot leave an axis's step silently" do
    expect(described_class.unmatched).to eq([])
  end

  it "lists each axis's files from the checkout's root, each once" do
    SpecAxes::PATTERNS.each_key do |axis|
      files = described_class.files(axis)
      expect(files).to all(match(%r{\Aspec/.+_spec\.rb\z}))
      expect(files).to eq(files.uniq)
    end
  end
end
