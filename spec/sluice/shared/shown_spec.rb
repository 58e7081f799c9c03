# frozen_string_literal: true

RSpec.describe Sluice::Shared::Shown do
  let(:data) do
    { topic: "t", headers: { "k" => ["v", nil] }, key: :sym, partition: 1, nil => 2.5,
      "a-b": 1, "c=": 2, "@iv": 3, "+": 4, "": 5, a?: 6, b!: 7, Const: 8, é: 9 }
  end

  it "writes Hashes, nested ones too, as Ruby 3.4 does, on every Ruby" do
    expect(described_class.call(data))
      .to eq('{topic: "t", headers: {"k" => ["v", nil]}, key: :sym, partition: 1, nil => 2.5, ' \
             '"a-b": 1, "c=": 2, "@iv": 3, "+": 4, "": 5, a?: 6, b!: 7, Const: 8, é: 9}')
  end

  it "is Hash#inspect itself from Ruby 3.4 on" do
    skip "Ruby #{RUBY_VERSION} writes {:topic=>\"t\"}" if RUBY_VERSION < "3.4"
    expect(described_class.call(data)).to eq(data.inspect)
    expect(described_class.call([data, "x", 1])).to eq([data, "x", 1].inspect)
  end

  it "writes a Hash or Array inside itself as inspect does, instead of recursing forever" do
    hash = { a: 1 }
    hash[:self] = hash
    list = [1]
    list << list
    expect(described_class.call(hash)).to eq("{a: 1, self: {...}}")
    expect(described_class.call(list)).to eq(list.inspect)
    expect(described_class.call({ list: list, again: list })).to eq("{list: [1, [...]], again: [1, [...]]}")
  end

  it "leaves anything else to its own inspect" do
    expect(described_class.call("x\n")).to eq('"x\n"')
    expect(described_class.call(nil)).to eq("nil")
  end
end
