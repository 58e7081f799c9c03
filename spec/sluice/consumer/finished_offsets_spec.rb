# frozen_string_literal: true

# Consumer::FinishedOffsets: what finished above a committed offset, in that
# offset's metadata (a version prefix, the base, a base64 bitset).
RSpec.describe Sluice::Consumer::FinishedOffsets do
  it "names the finished offsets relative to the offset stored, and reads them back" do
    metadata = described_class.encode(1200, [1202, 1200, 1209])
    expect(metadata).to eq("sluice1:1200:BQI=")
    expect(described_class.decode(metadata, 1200)).to eq([1200, 1202, 1209])
  end

  it "ignores metadata written with another offset, another encoding or none" do
    metadata = described_class.encode(10, [11, 12])
    expect(described_class.decode(metadata, 11)).to eq([])
    expect(described_class.decode("app says hi", 10)).to eq([])
    expect(described_class.decode("sluice1:10:***", 10)).to eq([])
    expect(described_class.decode(nil, 10)).to eq([])
  end

  it "stays under the broker's offset.metadata.max.bytes, leaving out what is too far above (read again)" do
    far = 1_000_000 + described_class::MAX_SPAN
    metadata = described_class.encode(1_000_000, [1_000_001, far - 1, far, far + 5])
    expect(metadata.bytesize).to be < 4096
    expect(described_class.decode(metadata, 1_000_000)).to eq([1_000_001, far - 1])
  end

  it "has nothing to say when nothing finished within reach (plain offsets)" do
    expect(described_class.encode(5, [])).to be_nil
    expect(described_class.encode(5, [3, 4])).to be_nil
    expect(described_class.encode(5, [5 + described_class::MAX_SPAN])).to be_nil
  end
end
