# frozen_string_literal: true

module Sluice
  # The gem's version.
  VERSION = "0.1.0"

  # The librdkafka release sluice builds from source and links into its
  # extension (ext/sluice/librdkafka_recipe.rb), unless told to use the
  # system's. Upgrading is changing this: the version, the SHA-256 of each
  # archive of it the build accepts (checked before anything is unpacked),
  # where to download one, tried in order, and, where an archive's bytes
  # cannot be pinned (GitHub's of a tag), the git tree its tag names (`tree`):
  # such an archive is accepted when it unpacks to that tree
  # (ext/sluice/recipe/source_tree.rb).
  LIBRDKAFKA = {
    version: "2.15.0",
    sha256: {
      # `git archive --format=tar.gz --prefix=librdkafka-2.15.0/ v2.15.0` (../shared/sources on this project's
      # machines: no registry they reach serves 2.15.0, and bin/setup copies it from there)
      "librdkafka-2.15.0.tar.gz" => "e91615f7ca9111f9e83109ce4b91036477620791f76810c21e143460ac6c2b84"
    }.freeze,
    tree: "429a83d1ba5350c0846aeaee4efe821b463f6b85", # tag v2.15.0 = commit 9a94e11452cdeb0a844db44ee5dd01ccbe17d3ab
    urls: ["https://github.com/confluentinc/librdkafka/archive/refs/tags/v2.15.0.tar.gz"].freeze
  }.freeze

  # Releases the bundled build makes on request instead (SLUICE_LIBRDKAFKA_VERSION=2.14.2); same shape.
  # 2.14.2, the release before, stays while it is the one a machine without GitHub can build from a
  # registry (Debian's source package) and KIP-848 is measured on 2.15.0 only by CI's Kafka 4 steps.
  LIBRDKAFKA_OPT_IN = {
    "2.14.2" => {
      version: "2.14.2",
      sha256: {
        # the release archive (GitHub's archive of the tag)
        "v2.14.2.tar.gz" => "d7eec9c31c817fa44402f679c252dfbf97e4c338a849a25c3579a31fd127beb8",
        # Debian's source package of the same release (sid: librdkafka 2.14.2-1), the tag's tree
        "librdkafka_2.14.2.orig.tar.gz" => "4d53568c13717b167d12c7b2a0fe12aeb5d6bfe02de53df5b68f86d870a81b33"
      }.freeze,
      urls: ["https://github.com/confluentinc/librdkafka/archive/refs/tags/v2.14.2.tar.gz",
             "https://deb.debian.org/debian/pool/main/libr/librdkafka/librdkafka_2.14.2.orig.tar.gz"].freeze
    }.freeze
  }.freeze

  # What the bundled librdkafka links besides itself, each built from a pinned
  # source (ext/sluice/recipe/dependencies.rb) and linked in statically, so
  # that no system archive (Debian 13's libz.a is not position-independent)
  # ever ends up in the extension. Same shape as LIBRDKAFKA.
  #
  # The versions are Debian 13's (trixie, stable): OpenSSL 3.5 is the
  # long-term-support branch (supported to 2030; librdkafka 2.14.2's own
  # static builds use it too), and a stable release's sources stay published
  # for years where sid's are replaced within weeks. Debian's .orig archives
  # are what these machines can reach (bin/setup fetches them); everyone
  # else downloads the upstream release, or Debian's archive from the URL
  # given, which any machine can reach as well.
  LIBRDKAFKA_DEPENDENCIES = {
    zlib: {
      version: "1.3.1",
      sha256: {
        # Debian's repack (trixie: zlib 1:1.3.dfsg+really1.3.1-1; contrib/, win32/ and the RFCs removed, the
        # library's sources unchanged). The upstream release zlib-1.3.1.tar.gz (https://zlib.net/fossils/zlib-1.3.1.tar.gz) is
        # not accepted yet: its SHA-256 could not be checked where this was pinned (no access to zlib.net or
        # GitHub), so without Debian's archive at hand the build downloads Debian's, from the URL below.
        "zlib_1.3.dfsg+really1.3.1.orig.tar.gz" => "60dd315c07f616887caa029408308a018ace66e3d142726a97db164b3b8f69fb"
      }.freeze,
      urls: ["https://deb.debian.org/debian/pool/main/z/zlib/zlib_1.3.dfsg+really1.3.1.orig.tar.gz"].freeze
    }.freeze,
    zstd: {
      version: "1.5.7",
      sha256: {
        # the release archive; its SHA-256 as librdkafka 2.14.2 pins it for its own static builds
        # (mklove/modules/configure.libzstd in the librdkafka archive pinned above)
        "zstd-1.5.7.tar.gz" => "eb33e51f49a15e023950cd7825ca74a4a2b43db8354825ac24fc1b7ee09e6fa3",
        # Debian's repack (trixie: libzstd 1.5.7+dfsg-1; Visual Studio, Windows and CI files removed, lib/ unchanged)
        "libzstd_1.5.7+dfsg.orig.tar.xz" => "0c092ef267edce57ba7f3f2645c861f72eaf5e76273c6c3632869423464b90a5"
      }.freeze,
      urls: ["https://github.com/facebook/zstd/releases/download/v1.5.7/zstd-1.5.7.tar.gz",
             "https://deb.debian.org/debian/pool/main/libz/libzstd/libzstd_1.5.7+dfsg.orig.tar.xz"].freeze
    }.freeze,
    openssl: {
      version: "3.5.7",
      sha256: {
        # Debian's .orig is the release archive itself, byte for byte (trixie: openssl 3.5.7-1~deb13u2; checked
        # with OpenSSL's signature, openssl_3.5.7.orig.tar.gz.asc, against the key Debian ships): one checksum
        "openssl-3.5.7.tar.gz" => "a8c0d28a529ca480f9f36cf5792e2cd21984552a3c8e4aa11a24aa31aeac98e8",
        "openssl_3.5.7.orig.tar.gz" => "a8c0d28a529ca480f9f36cf5792e2cd21984552a3c8e4aa11a24aa31aeac98e8"
      }.freeze,
      urls: ["https://github.com/openssl/openssl/releases/download/openssl-3.5.7/openssl-3.5.7.tar.gz",
             "https://deb.debian.org/debian/pool/main/o/openssl/openssl_3.5.7.orig.tar.gz"].freeze
    }.freeze,
    # GSSAPI (Kerberos), built only where asked for (SLUICE_LIBRDKAFKA_GSSAPI=static: the precompiled
    # gems): MIT Kerberos's client libraries, then Cyrus SASL with only its GSSAPI mechanisms on them.
    krb5: {
      version: "1.21.3",
      sha256: {
        # Debian's .orig is MIT's release archive itself (trixie: krb5 1.21.3-5+deb13u1; Debian ships MIT's
        # signature of it beside it, krb5_1.21.3.orig.tar.gz.asc): one checksum
        "krb5-1.21.3.tar.gz" => "b7a4cd5ead67fb08b980b21abd150ff7217e85ea320c9ed0c6dadd304840ad35",
        "krb5_1.21.3.orig.tar.gz" => "b7a4cd5ead67fb08b980b21abd150ff7217e85ea320c9ed0c6dadd304840ad35"
      }.freeze,
      urls: ["https://kerberos.org/dist/krb5/1.21/krb5-1.21.3.tar.gz",
             "https://deb.debian.org/debian/pool/main/k/krb5/krb5_1.21.3.orig.tar.gz"].freeze
    }.freeze,
    cyrus_sasl: {
      version: "2.1.28",
      sha256: {
        # Debian's repack (trixie: cyrus-sasl2 2.1.28+dfsg1-9; some files removed, among them
        # include/makemd5.c and common/crypto-compat.c, which only what is left out here needs). The
        # upstream release is not accepted yet, for the reason given for zlib's.
        "cyrus-sasl2_2.1.28+dfsg1.orig.tar.xz" => "e796a5d85d1a85e1b433d43504e467f9075c7ebc0b45730a3996cf11b1deada4"
      }.freeze,
      urls: ["https://deb.debian.org/debian/pool/main/c/cyrus-sasl2/cyrus-sasl2_2.1.28+dfsg1.orig.tar.xz"].freeze
    }.freeze
  }.freeze
end
