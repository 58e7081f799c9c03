# shellcheck shell=bash
# TLS material of the single broker's SSL and SASL_SSL listeners: a test CA and the broker's keystore,
# made with keytool under tmp/kafka/$KAFKA_PORT/tls/, again once a day.

TLS_DIR="$DIR/tls"
TLS_PASSWORD="sluice-test"

# A self-signed CA and the broker's certificate for 127.0.0.1/localhost (clients trust
# tmp/kafka/$KAFKA_PORT/tls/ca.pem), valid 30 days and made again when a day old: seven keytool JVMs and
# two RSA keys are about 4 s of CPU, and the own-broker specs start their brokers dozens of times.
# Short-lived: nothing outside tests may rely on them.
make_tls() {
  local k=(keytool -storetype PKCS12 -storepass "$TLS_PASSWORD" -keypass "$TLS_PASSWORD")
  # .complete: written last, so that a keystore cut short by a failed step is never taken.
  [[ -f "$TLS_DIR/.complete" && -z "$(find "$TLS_DIR/.complete" -mmin +1440)" ]] && return 0
  rm -rf "$TLS_DIR"
  mkdir -p "$TLS_DIR"
  {
    "${k[@]}" -genkeypair -alias ca -keyalg RSA -keysize 2048 -validity 30 -dname "CN=sluice test CA" \
      -ext bc:c -keystore "$TLS_DIR/ca.p12"
    "${k[@]}" -exportcert -rfc -alias ca -keystore "$TLS_DIR/ca.p12" -file "$TLS_DIR/ca.pem"
    "${k[@]}" -genkeypair -alias broker -keyalg RSA -keysize 2048 -validity 30 -dname "CN=127.0.0.1" \
      -keystore "$TLS_DIR/broker.p12"
    "${k[@]}" -certreq -alias broker -keystore "$TLS_DIR/broker.p12" -file "$TLS_DIR/broker.csr"
    "${k[@]}" -gencert -rfc -alias ca -keystore "$TLS_DIR/ca.p12" -infile "$TLS_DIR/broker.csr" \
      -outfile "$TLS_DIR/broker.pem" -validity 30 -ext "SAN=IP:127.0.0.1,DNS:localhost"
    "${k[@]}" -importcert -noprompt -alias ca -file "$TLS_DIR/ca.pem" -keystore "$TLS_DIR/broker.p12"
    "${k[@]}" -importcert -noprompt -alias broker -file "$TLS_DIR/broker.pem" -keystore "$TLS_DIR/broker.p12"
  } >"$DIR/tls.log" 2>&1 || { prefix <"$DIR/tls.log" >&2; die "making the test CA with keytool failed"; }
  : >"$TLS_DIR/.complete"
}
