# shellcheck shell=bash
# SASL on the single broker beyond what its server.properties always has (single.sh: OAUTHBEARER unsecured,
# SCRAM-SHA-512 and PLAIN): OAUTHBEARER validated against a JWKS (KAFKA_OAUTH_JWKS_URL), GSSAPI
# (KAFKA_KERBEROS), and its SCRAM users (the test user made at format time, `bin/kafka scram-user`).

# shellcheck disable=SC2034 # single.sh's cmd_start formats storage with it
SCRAM_USER='SCRAM-SHA-512=[name=alice,password=alice-secret]' # the single broker's test user

# The SASL_PLAINTEXT listener's OAUTHBEARER tokens validated for real (KAFKA_OAUTH_JWKS_URL): signed JWTs
# whose key is in that JWKS, as an identity provider issues them (spec/integration/oauth/client_credentials_spec.rb).
write_jwks_config() {
  cat >>"$PROPS" <<EOF

# OAUTHBEARER on SASL_PLAINTEXT validated by Kafka's JWT validator against ${KAFKA_OAUTH_JWKS_URL}.
listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
sasl.oauthbearer.jwks.endpoint.url=${KAFKA_OAUTH_JWKS_URL}
sasl.oauthbearer.expected.audience=${KAFKA_OAUTH_AUDIENCE:-kafka}
EOF
}

# GSSAPI beside SCRAM and PLAIN on the SCRAM listener: the broker logs in from its keytab at start, so
# the realm's KDC must be running by then (the JVM is pointed at its krb5.conf in broker.sh's launch).
write_kerberos_config() {
  local realm
  realm="$(sed -n 's/^[[:space:]]*default_realm[[:space:]]*=[[:space:]]*//p' "$KAFKA_KERBEROS/krb5.conf")"
  [[ -n "$realm" && -f "$KAFKA_KERBEROS/kafka.keytab" ]] ||
    die "KAFKA_KERBEROS=$KAFKA_KERBEROS: expected krb5.conf (with a default_realm) and kafka.keytab there"
  sed -i 's/^listener.name.scram.sasl.enabled.mechanisms=.*/&,GSSAPI/' "$PROPS"
  cat >>"$PROPS" <<EOF

# Kerberos (KAFKA_KERBEROS=${KAFKA_KERBEROS}): GSSAPI on the SCRAM listener.
sasl.kerberos.service.name=kafka
listener.name.scram.gssapi.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="${KAFKA_KERBEROS}/kafka.keytab" principal="kafka/${HOST}@${realm}";
EOF
}

# Adds (or changes) a SCRAM-SHA-512 user while the broker runs: the specs rotate credentials with it.
cmd_scram_user() {
  local name="${1:-}" password="${2:-}" cls
  [[ -n "$name" && -n "$password" ]] || usage
  # Right after a start (cmd_start calls this), a loaded machine can take a 2 s probe's time to answer.
  local i
  for ((i = 0; i < 5; i++)); do port_open "$KAFKA_PORT" && break; done
  ((i < 5)) || die "no broker on ${HOST}:${KAFKA_PORT} (bin/kafka start)"
  cls="$(find_class org.apache.kafka.tools.ConfigCommand kafka.admin.ConfigCommand)"
  run_tool "$cls" --bootstrap-server "${HOST}:${KAFKA_PORT}" --alter --entity-type users --entity-name "$name" \
    --add-config "SCRAM-SHA-512=[password=${password}]" </dev/null 2>&1 | prefix
}
