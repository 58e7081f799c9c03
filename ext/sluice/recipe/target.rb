# frozen_string_literal: true

module SluiceBuild
  # The system librdkafka and its dependencies are built for. Natively (the
  # default) nothing is added: each build finds this machine's compiler as it
  # always has, and its cache key stays what it was. Cross
  # (SLUICE_CROSS_HOST=aarch64-linux-gnu, which `rake native` sets for
  # another platform): each build is given that GNU triplet's tools, and what
  # it is given is part of its cache key, so cross builds never mix with
  # this machine's.
  class Target
    ENV_NAME = "SLUICE_CROSS_HOST"
    # OpenSSL's Configure names targets its own way.
    OPENSSL_TARGETS = { "aarch64" => "linux-aarch64", "x86_64" => "linux-x86_64" }.freeze

    def self.current = new(ENV.fetch(ENV_NAME, ""))

    # @param triplet [String] "aarch64-linux-gnu", or "" for this machine
    def initialize(triplet)
      @triplet = triplet
    end

    attr_reader :triplet

    def cross? = !@triplet.empty?

    def cpu = @triplet[/\A[^-]+/]

    def tool(name) = "#{@triplet}-#{name}"

    # What make-based builds read from the environment (zstd's Makefile,
    # mklove): every tool named, since a plain `ar` or `ranlib` of this
    # machine may not index another architecture's objects.
    def tools_env
      return {} unless cross?

      { "CC" => tool("gcc"), "AR" => tool("ar"), "RANLIB" => tool("ranlib"), "NM" => tool("nm"),
        "LD" => tool("ld"), "STRIP" => tool("strip") }
    end

    # @return [String] OpenSSL's Configure target
    # @raise [Error]
    def openssl_target
      OPENSSL_TARGETS.fetch(cpu) { raise Error, "#{ENV_NAME}=#{@triplet}: no OpenSSL target known for #{cpu}" }
    end
  end
end
