# frozen_string_literal: true

require "digest"
require "open3"
require "tmpdir"

module SluiceBuild
  # The git tree id of what a source archive unpacks to, computed without
  # git: the id of the tree a tag names (`git rev-parse v2.15.0^{tree}`).
  # GitHub's archive of a tag and a `git archive` of it made elsewhere hold
  # the same tree but not always the same bytes (compression, headers), so
  # a pin that must accept both names the tree. The archive is unpacked into
  # a scratch directory of its own (tar refuses members outside it) and
  # removed again; nothing of it is used before its tree is the pinned one.
  class SourceTree
    # @param archive [String] a .tar.gz holding one top directory, as release archives do
    def initialize(archive)
      @archive = archive
    end

    # @return [String] the tree id (40 hex digits) of the archive's top directory
    # @raise [Error] when tar cannot unpack it, or it holds more than one top directory
    def id
      Dir.mktmpdir("sluice-tree-") do |dir|
        output, status = Open3.capture2e("tar", "-xzf", File.expand_path(@archive), chdir: dir)
        raise Error, "#{@archive}: tar could not unpack it: #{output.strip}" unless status.success?

        tops = Dir.children(dir)
        raise Error, "#{@archive}: expected one top directory, found #{tops.sort.join(", ")}" unless tops.size == 1

        tree(File.join(dir, tops.first))
      end
    end

    private

    # git's order: by name, a directory's name as if it ended in "/". nil
    # for a directory with no file below it: git keeps no such tree.
    def tree(dir)
      entries = Dir.children(dir).filter_map { |name| entry(File.join(dir, name), name) }
      return if entries.empty?

      git_id("tree", entries.sort_by { |sort_key, _| sort_key }.map { |_, line| line }.join)
    end

    # [sort key, "<mode> <name>\0<20-byte id>"], or nil
    def entry(path, name)
      mode, id, key = if File.symlink?(path) then ["120000", git_id("blob", File.readlink(path)), name]
                      elsif File.directory?(path) then directory(path, name)
                      else
                        file(path, name)
                      end
      id && [key.b, "#{mode} #{name}\0".b + [id].pack("H*")]
    end

    def file(path, name) = [File.executable?(path) ? "100755" : "100644", git_id("blob", File.binread(path)), name]

    def directory(path, name)
      id = tree(path)
      [id && "40000", id, "#{name}/"]
    end

    def git_id(type, content) = Digest::SHA1.hexdigest("#{type} #{content.bytesize}\0".b + content.b)
  end
end
