# frozen_string_literal: true

require "digest"
require "fileutils"
require "uri"
require_relative "source_tree"

module SluiceBuild
  # A build that cannot go on; its message says what to do about it.
  class Error < StandardError; end

  # One source as lib/sluice/version.rb pins it: its version, the archives of
  # it the build accepts (file name => SHA-256) and where to download one;
  # optionally the git tree id an archive of it unpacks to, for archives
  # whose bytes cannot be pinned (GitHub's of a tag: SourceTree).
  Pin = Struct.new(:name, :title, :version, :sha256, :urls, :tree, keyword_init: true) do
    def label = "#{title} #{version}"

    # SLUICE_<NAME>_ARCHIVE, SLUICE_<NAME>_URL
    def env(setting) = "SLUICE_#{name.upcase}_#{setting}"

    # The names an archive of it is looked for under: the SHA-256-pinned ones
    # and, with a pinned tree, those its URLs download as.
    def archive_names = (sha256.keys + (tree ? urls.map { |url| File.basename(URI(url).path) } : [])).uniq
  end

  # A pin's source archive, verified: the one named by SLUICE_<NAME>_ARCHIVE,
  # else one found in the archive directories, else one downloaded (from
  # SLUICE_<NAME>_URL, else from the pin's URLs in order). Nothing is used,
  # or kept under an archive's name, before its SHA-256 is one the pin lists,
  # or, for a pin that names a tree, before it unpacks to that tree.
  class Archive
    def initialize(pin, dirs:, download_dir:, log:)
      @pin = pin
      @dirs = dirs
      @download_dir = download_dir
      @log = log
      @identities = {}
    end

    # @return [String] the path of a verified archive
    # @raise [Error]
    def path
      given = ENV.fetch(@pin.env("ARCHIVE"), "")
      return verified(given, "#{@pin.env("ARCHIVE")}=#{given}") unless given.empty?

      found = candidates.find do |path|
        pinned?(path).tap { |ok| say "#{path} is not the pinned archive; not used" unless ok }
      end
      found ? verified(found, found) : download
    end

    private

    def say(text) = @log.puts("sluice: #{@pin.label}: #{text}")

    def candidates = @dirs.product(@pin.archive_names).map { |dir, name| File.join(dir, name) }.select { |path| File.file?(path) }

    def pinned?(path) = !identity(path).nil?

    # What makes the file the pinned source ("<pinned name>", "git tree <id>"), or nil.
    def identity(path)
      @identities.fetch(path) do
        known = @pin.sha256.key(Digest::SHA256.file(path).hexdigest)
        known ||= "git tree #{@pin.tree}" if @pin.tree && tree_of(path) == @pin.tree
        @identities[path] = known
      end
    end

    def tree_of(path)
      SourceTree.new(path).id
    rescue Error # not an archive tar can unpack: not the source
      nil
    end

    def urls = ENV.fetch(@pin.env("URL"), "").then { |given| given.empty? ? @pin.urls : [given] }

    def verified(path, source)
      raise Error, "#{source}: no such file" unless File.file?(path)

      known = identity(path)
      raise Error, "#{source} is not #{@pin.label} as pinned: #{mismatch(path)}" unless known

      say "#{source} (#{known.start_with?("git tree") ? "verified: its #{known}" : "SHA-256 verified: #{known}"})"
      path
    end

    def mismatch(path)
      sums = "its SHA-256 is #{Digest::SHA256.file(path).hexdigest}, expected one of " \
             "#{@pin.sha256.map { |name, sum| "#{sum} (#{name})" }.join(", ")}"
      return "#{sums}. Nothing was unpacked." unless @pin.tree

      "#{sums}, or an archive of git tree #{@pin.tree} (it unpacked to #{SourceTree.new(path).id}). Nothing of it was used."
    rescue Error => e # not even an archive
      "#{sums}; #{e.message}. Nothing of it was used."
    end

    # Each URL in turn; the first verified download is kept, under the
    # pinned name its checksum matched. A wrong one (a proxy's error page, a
    # mirror's other release) is deleted, never kept for every later build
    # to fail on; it stops the search, as a download that failed does not.
    def download
      require "net/http"
      FileUtils.mkdir_p(@download_dir)
      failures = urls.filter_map do |url|
        part = File.join(@download_dir, "#{File.basename(url)}.part.#{Process.pid}")
        begin
          say "downloading #{url}"
          fetch(URI(url), part)
          return keep(verified(part, url), url)
        rescue Error
          raise
        rescue StandardError => e
          "#{url} (#{e.class}: #{e.message})"
        ensure
          FileUtils.rm_f(part)
        end
      end
      raise Error, "could not download #{failures.join("; ")}. Without network, download one of " \
                   "#{@pin.sha256.keys.join(", ")} elsewhere and set #{@pin.env("ARCHIVE")}=/path/to/it, " \
                   "or build against the system's librdkafka with SLUICE_USE_SYSTEM_LIBRDKAFKA=1"
    end

    # Under its pinned name, or, verified by its tree, the URL's.
    def keep(part, url)
      name = @pin.sha256.key(Digest::SHA256.file(part).hexdigest) || File.basename(URI(url).path)
      path = File.join(@download_dir, name)
      File.rename(part, path) # replaces a wrong file of that name
      path
    end

    def fetch(uri, path, redirects = 5)
      Net::HTTP.start(uri.host, uri.port, use_ssl: uri.scheme == "https", open_timeout: 30, read_timeout: 60) do |http|
        http.request(Net::HTTP::Get.new(uri)) do |response|
          case response
          when Net::HTTPRedirection
            raise "too many redirects" if redirects.zero?

            return fetch(URI(response["location"]), path, redirects - 1)
          when Net::HTTPSuccess then File.open(path, "wb") { |file| response.read_body { |chunk| file.write(chunk) } }
          else raise "HTTP #{response.code}"
          end
        end
      end
    end
  end
end
