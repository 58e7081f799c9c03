# frozen_string_literal: true

# The producer is one object (issue 59, item 2): its state is its own ivars and its collaborators', never a
# module's. A module mixed into Sluice::Producer may call the producer's methods, but no method of it may
# read or write an instance variable (compiled code: getinstancevariable, setinstancevariable, defined?(@x);
# attr_* readers and writers, which have no Ruby code; instance_variable_get and kin).
RSpec.describe Sluice::Producer do
  # Instructions and calls that reach an instance variable, in a method's disassembly (its blocks' included):
  # get/setinstancevariable, defined's instance-variable (definedivar on Ruby 3.3), instance_variable_get and kin.
  ivar_access = /instance.?variable|definedivar/
  define_method(:ivar_pattern) { ivar_access }

  def methods_of(mod)
    names = mod.instance_methods(false) + mod.private_instance_methods(false) + mod.protected_instance_methods(false)
    names.map { |name| mod.instance_method(name) }
  end

  # nil, or why the method touches state.
  def ivar_access(method)
    iseq = RubyVM::InstructionSequence.of(method)
    return "an attr_* accessor (no Ruby code)" if iseq.nil? && method.source_location

    iseq && iseq.disasm[ivar_pattern]
  end

  def offenders(mod) = methods_of(mod).filter_map { |m| (found = ivar_access(m)) && "#{mod}##{m.name}: #{found}" }

  it "mixes in no Sluice module whose methods touch instance variables" do
    stateful = Module.new do
      attr_reader :read_by_attr

      def read = @read # rubocop:disable Style/TrivialAccessors -- the getinstancevariable instruction is the case
      def write = (@written = 1)
      def asked = defined?(@asked)
      def in_block = [1].map { @in_block }
      def by_name = instance_variable_get(:@by_name)
      def calls_only = read
    end

    expect(methods_of(stateful).reject { |m| ivar_access(m) }.map(&:name)).to eq([:calls_only]) # the check sees every way in

    mixins = described_class.ancestors.grep(Module).reject { |mod| mod.is_a?(Class) }.select { |mod| mod.name&.start_with?("Sluice::") }

    expect(mixins).not_to be_empty # Tombstones and Clock: the check below has something to check
    expect(mixins.flat_map { |mod| offenders(mod) }).to eq([])
  end
end
