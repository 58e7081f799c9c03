# frozen_string_literal: true

require "zlib"

# Where a keyed message goes. sluice keeps librdkafka's default partitioner,
# consistent_random (CRC32 of the key, as WaterDrop), so WaterDrop users'
# topics keep their placement; the Java client (and Kafka Streams) hash keys
# with murmur2, which `partitioner: "murmur2_random"` matches. Both are
# checked against the hash functions written out here.
RSpec.describe "Key partitioning", :kafka do
  let(:topic) { "sluice-spec-keys" }
  let(:partitions) { 6 }
  let(:keys) { Array.new(300) { |i| "key-#{i}-#{"x" * (i % 7)}" } } # every tail length of murmur2

  let(:m) { 0x5bd1e995 }
  let(:mask) { 0xffffffff }

  # Kafka's Utils.murmur2 (the Java DefaultPartitioner's hash), on 32-bit words.
  def murmur2(bytes)
    length = bytes.bytesize
    h = (0x9747b28c ^ length) & mask
    words = length / 4
    bytes.unpack("V#{words}").each do |k|
      k = (k * m) & mask
      k ^= k >> 24
      k = (k * m) & mask
      h = ((h * m) & mask) ^ k
    end
    tail = bytes.byteslice(words * 4, length % 4).bytes
    h ^= tail[2] << 16 if tail.size >= 3
    h ^= tail[1] << 8 if tail.size >= 2
    h = ((h ^ tail[0]) * m) & mask if tail.size >= 1
    h ^= h >> 13
    h = (h * m) & mask
    h ^ (h >> 15)
  end

  def java_partition(key) = (murmur2(key) & 0x7fffffff) % partitions

  def crc32_partition(key) = Zlib.crc32(key) % partitions

  def placed_by(producer)
    reports = producer.produce_many_sync(keys.map { |key| { topic: topic, key: key, payload: "p" } })
    keys.zip(reports.map(&:partition)).to_h
  end

  it "checks the murmur2 written here against Kafka's published test vectors" do
    # org.apache.kafka.common.utils.UtilsTest#testMurmur2
    expect({ "21" => -973_932_308, "foobar" => -790_332_482, "a-little-bit-long-string" => -985_981_536,
             "a-little-bit-longer-string" => -1_486_304_829, "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8" => -58_897_971,
             "abc" => 479_470_107 }.transform_values { |v| v & mask }).to eq(
               %w[21 foobar a-little-bit-long-string a-little-bit-longer-string
                  lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8 abc].to_h { |key| [key, murmur2(key)] }
             )
  end

  it "places keys by CRC32 by default (librdkafka's consistent_random, as WaterDrop)" do
    placed = placed_by(build_producer)
    expect(placed).to eq(keys.to_h { |key| [key, crc32_partition(key)] })
    expect(placed.count { |key, partition| partition == java_partition(key) }).to be < keys.size / 2
  end

  it "places keys as the Java client does with partitioner: murmur2_random" do
    placed = placed_by(build_producer(kafka: { partitioner: "murmur2_random" }))
    expect(placed).to eq(keys.to_h { |key| [key, java_partition(key)] })
  end
end
