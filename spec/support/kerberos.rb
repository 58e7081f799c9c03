# frozen_string_literal: true

require "fileutils"
require "open3"
require "socket"

# A Kerberos realm of the specs' own, for GSSAPI: MIT's KDC (Debian's
# krb5-kdc; bin/setup installs it) on a loopback port, its database and
# keytabs under tmp/kerberos, and a broker (bin/kafka on ports 9392-9397)
# that offers GSSAPI on its SCRAM listener as kafka/127.0.0.1 of the realm.
# Clients find the realm through KRB5_CONFIG (env), never /etc/krb5.conf.
# Started and stopped by one process or two (bin/test-aarch64: `ruby -r
# ./spec/support/kerberos -e Kerberos.start`, later `-e Kerberos.stop`).
module Kerberos
  REALM = "SLUICE.TEST"
  DIR = File.expand_path("../../tmp/kerberos", __dir__)
  KRB5_CONF = File.join(DIR, "krb5.conf")
  KDC_PORT = 9388
  KDC_PID_FILE = File.join(DIR, "krb5kdc.pid")
  CLIENT = "sluice-client"
  CLIENT_KEYTAB = File.join(DIR, "client.keytab")
  TOPIC = "sluice-spec-gssapi" # made at start: no first message waits for its creation
  TOOLS = %w[krb5kdc kdb5_util kadmin.local kinit].freeze
  BROKER_PORTS = { "KAFKA_PORT" => "9392", "KAFKA_CONTROLLER_PORT" => "9393", "KAFKA_SASL_PORT" => "9394",
                   "KAFKA_SCRAM_PORT" => "9395", "KAFKA_SSL_PORT" => "9396", "KAFKA_SASL_SSL_PORT" => "9397" }.freeze
  # The listener with GSSAPI (SASL_PLAINTEXT).
  BROKERS = "127.0.0.1:#{BROKER_PORTS.fetch("KAFKA_SCRAM_PORT")}".freeze
  KAFKA = File.expand_path("../../bin/kafka", __dir__)

  module_function

  # @return [Array<String>] the MIT Kerberos tools this machine lacks
  def missing_tools = TOOLS.reject { |name| File.executable?(tool(name)) }

  # A new realm (database, principals, keytabs), its KDC, then the broker
  # (which logs in from its keytab as it starts) and the topic.
  def start
    stop
    broker("stop") # one left from a run that ended without stopping it would hold the old realm's keys
    raise "127.0.0.1:#{KDC_PORT} is taken: a KDC left running (pkill krb5kdc)?" if listening?

    FileUtils.rm_rf(DIR)
    FileUtils.mkdir_p(DIR)
    write_configs
    run("kdb5_util", "-r", REALM, "-P", "sluice-test-master", "create", "-s")
    ["kafka/127.0.0.1", CLIENT].each { |principal| run("kadmin.local", "-r", REALM, "-q", "addprinc -randkey #{principal}") }
    run("kadmin.local", "-r", REALM, "-q", "ktadd -k #{DIR}/kafka.keytab kafka/127.0.0.1")
    run("kadmin.local", "-r", REALM, "-q", "ktadd -k #{CLIENT_KEYTAB} #{CLIENT}")
    kdc = Process.spawn(env, tool("krb5kdc"), "-n", "-P", KDC_PID_FILE, "-r", REALM,
                        out: File.join(DIR, "krb5kdc.out"), err: %i[child out], pgroup: true)
    Process.detach(kdc) # whoever stops it may be another process: nothing here waits for it
    wait_for_kdc(kdc)
    broker("start")
    broker("topic", TOPIC)
  end

  # The broker and the KDC, if they run.
  def stop
    return unless File.exist?(KDC_PID_FILE)

    broker("stop")
    pid = Integer(File.read(KDC_PID_FILE))
    File.delete(KDC_PID_FILE)
    Process.kill("TERM", pid)
    sleep 0.05 while alive?(pid) # not necessarily a child of this process: nothing to wait on
  rescue Errno::ESRCH
    nil # gone already
  end

  # What a process needs to find the realm (and nothing of this machine's).
  # @param ccache [String] its credential cache
  def env(ccache: File.join(DIR, "ccache"))
    { "KRB5_CONFIG" => KRB5_CONF, "KRB5_KDC_PROFILE" => File.join(DIR, "kdc.conf"), "KRB5CCNAME" => "FILE:#{ccache}" }
  end

  # The client's configuration: librdkafka runs kinit from the keytab (its
  # default sasl.kerberos.kinit.cmd) at start and again before the ticket ends.
  def client_config(principal: CLIENT, keytab: CLIENT_KEYTAB)
    { "bootstrap.servers": BROKERS, "security.protocol": "sasl_plaintext", "sasl.mechanisms": "GSSAPI",
      "sasl.kerberos.service.name": "kafka", "sasl.kerberos.principal": principal, "sasl.kerberos.keytab": keytab }
  end

  # A ticket for the client in ccache, got here with this machine's kinit:
  # for a process that has no kinit of its own to run (a bare root).
  def kinit(ccache) = run("kinit", "-k", "-t", CLIENT_KEYTAB, "-c", "FILE:#{ccache}", CLIENT)

  # @return [Integer] the service tickets the KDC has issued: a client that
  # authenticated with GSSAPI asked for one (for kafka/127.0.0.1)
  def service_tickets = File.foreach(File.join(DIR, "kdc.log")).count { |line| line.include?("TGS_REQ") && line.include?("ISSUE") }

  def broker(*command)
    output, status = Open3.capture2e(BROKER_PORTS.merge("KAFKA_KERBEROS" => DIR), KAFKA, *command)
    raise "bin/kafka #{command.join(" ")} (the Kerberos broker) failed:\n#{output}" unless status.success?
  end

  # TCP only (udp_preference_limit 1), on which Java's Kerberos and MIT's
  # agree; names as given (no DNS: 127.0.0.1 is the broker's host name).
  def write_configs
    File.write(KRB5_CONF, <<~CONF)
      [libdefaults]
        default_realm = #{REALM}
        dns_lookup_realm = false
        dns_lookup_kdc = false
        dns_canonicalize_hostname = false
        rdns = false
        udp_preference_limit = 1
        ticket_lifetime = 1h
      [realms]
        #{REALM} = {
          kdc = 127.0.0.1:#{KDC_PORT}
        }
    CONF
    File.write(File.join(DIR, "kdc.conf"), <<~CONF)
      [kdcdefaults]
        kdc_listen = 127.0.0.1:#{KDC_PORT}
        kdc_tcp_listen = 127.0.0.1:#{KDC_PORT}
      [realms]
        #{REALM} = {
          database_name = #{DIR}/principal
          key_stash_file = #{DIR}/stash
          acl_file = #{DIR}/kadm5.acl
          max_life = 1h
          supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
        }
      [logging]
        kdc = FILE:#{DIR}/kdc.log
    CONF
    File.write(File.join(DIR, "kadm5.acl"), "")
  end

  # The KDC says it is ready only by listening.
  def wait_for_kdc(pid)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 15
    until listening?
      if !alive?(pid) || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        raise "krb5kdc did not listen on 127.0.0.1:#{KDC_PORT}: #{File.read(File.join(DIR, "krb5kdc.out"))}"
      end

      sleep 0.05
    end
  end

  def listening?
    TCPSocket.new("127.0.0.1", KDC_PORT).close
    true
  rescue SystemCallError
    false
  end

  # A zombie counts as gone: a KDC whose starter has exited may be left to
  # a PID 1 that reaps nothing (a container's).
  def alive?(pid)
    File.read("/proc/#{pid}/stat")[/\) (\S)/, 1] != "Z"
  rescue Errno::ENOENT
    false
  end

  # Debian keeps the KDC's tools in /usr/sbin, which a user's PATH may lack.
  def tool(name) = ["/usr/sbin/#{name}", "/usr/bin/#{name}"].find { |path| File.executable?(path) } || name

  def run(*command)
    output, status = Open3.capture2e(env, tool(command.first), *command.drop(1))
    raise "#{command.join(" ")} failed (#{status}):\n#{output}" unless status.success?

    output
  end
end
