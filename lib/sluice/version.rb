# frozen_string_literal: true

module Sluice
  # The gem's version.
  VERSION = "0.1.0"

  # The librdkafka release sluice builds from source and links into its
  # extension (ext/sluice/librdkafka_recipe.rb), unless told to use the
  # system's. Upgrading is changing this: the version and the SHA-256 of each
  # archive of it the build accepts (checked before anything is unpacked).
  LIBRDKAFKA = {
    version: "2.14.2",
    sha256: {
      # https://github.com/confluentinc/librdkafka/archive/refs/tags/v2.14.2.tar.gz (the release archive)
      "v2.14.2.tar.gz" => "d7eec9c31c817fa44402f679c252dfbf97e4c338a849a25c3579a31fd127beb8",
      # Debian's source package of the same release (sid: librdkafka 2.14.2-1), the tag's tree
      "librdkafka_2.14.2.orig.tar.gz" => "4d53568c13717b167d12c7b2a0fe12aeb5d6bfe02de53df5b68f86d870a81b33"
    }.freeze
  }.freeze
end
