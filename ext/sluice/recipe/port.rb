# frozen_string_literal: true

require "digest"
require "fileutils"

module SluiceBuild
  # mini_portile2 (as nokogiri builds its libraries) for one source: it
  # unpacks the verified archive into a work directory of this process's
  # own, applies the patches, then runs the build's steps (configure,
  # compile, install: each a list of commands, with the build's environment)
  # and logs each step to <step>.log. A failed build's work directory
  # stays, for its logs.
  class Port
    STEPS = %i[configure compile install].freeze

    # A step that failed, and the log that says why.
    class Failed < StandardError
      attr_reader :step, :log

      def initialize(step, log)
        @step = step
        @log = log
        super("#{step} failed")
      end
    end

    attr_reader :work_root

    # @param steps [Hash{Symbol => Array<Array<String>>}] commands per step, run in the unpacked source
    def initialize(pin, archive, prefix, steps:, env:, patches: [], log: $stdout)
      begin
        require "mini_portile2"
      rescue LoadError
        raise Error, "building #{pin.label} needs the mini_portile2 gem (gem install mini_portile2; Debian: " \
                     "ruby-mini-portile2), or SLUICE_USE_SYSTEM_LIBRDKAFKA=1 for an installed librdkafka"
      end
      @pin = pin
      @archive = archive
      @steps = steps
      @env = env
      @patches = patches
      @log = log
      @work_root = "#{prefix}.work.#{Process.pid}" # its own, whatever else builds from this cache
    end

    # @raise [Failed]
    def cook
      FileUtils.rm_rf(@work_root)
      FileUtils.mkdir_p(@work_root)
      portile = portile_class.new(@pin.name, @pin.version)
      portile.files = [{ url: "file://#{File.expand_path(@archive)}", sha256: Digest::SHA256.file(@archive).hexdigest }]
      portile.target = @work_root
      portile.patch_files = @patches
      portile.logger = @log
      Dir.chdir(@work_root) { portile.cook_steps(@steps, @env) } # mini_portile2 unpacks under ./tmp
    end

    # Once the build is installed and checked.
    def clean = FileUtils.rm_rf(@work_root)

    private

    def portile_class
      Class.new(MiniPortile) do
        def cook_steps(steps, env)
          download unless downloaded?
          extract
          patch
          STEPS.each do |step|
            steps.fetch(step, []).each { |command| run(step, command, env) }
          end
        end

        def run(step, command, env)
          execute(step.to_s, command, env: env)
        rescue RuntimeError # mini_portile2's "Failed to complete <step> task"
          raise Failed.new(step, File.expand_path("#{step}.log", tmp_path))
        end
      end
    end
  end
end
