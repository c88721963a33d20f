#!/usr/bin/env bash
# Generates the development certificates in Certs/ (ECDSA P-256, SHA-256, 10 years).
#
#   Scripts/generate-certs.sh          # create whatever is missing
#   Scripts/generate-certs.sh --force  # throw everything away and start over
#
# Idempotent: a file that exists is kept, so running it twice changes nothing.
# These certificates are for development and tests only; never use them in production.
set -euo pipefail

cd "$(dirname "$0")/../Certs"

if [[ "${1:-}" == "--force" ]]; then
    rm -f ./*.pem ./*.srl
fi

# crl OUTPUT REVOKED...: a CRL of the development CA (valid as long as the
# certificates) revoking the named leaves, made with `openssl ca` in $WORK.
crl() {
    local output="$1"
    shift
    rm -f "$WORK/index.txt" "$WORK/crlnumber"
    touch "$WORK/index.txt"
    echo 1000 > "$WORK/crlnumber"
    cat > "$WORK/ca.cnf" <<CONF
[ ca ]
default_ca = dev
[ dev ]
database = $WORK/index.txt
crlnumber = $WORK/crlnumber
certificate = ca.pem
private_key = ca-key.pem
default_md = sha256
default_crl_days = $DAYS
crl_extensions = crl_ext
[ crl_ext ]
authorityKeyIdentifier = keyid:always
CONF
    local name
    for name in "$@"; do
        openssl ca -config "$WORK/ca.cnf" -revoke "$name.pem" -crl_reason keyCompromise 2> /dev/null
    done
    openssl ca -config "$WORK/ca.cnf" -gencrl -out "$output" 2> /dev/null
}

DAYS=3650
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# key NAME: writes NAME-key.pem (PKCS#8, unencrypted) unless it exists.
key() {
    [[ -f "$1-key.pem" ]] || openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1-key.pem"
}

# ca NAME CN: a self-signed CA.
ca() {
    local name="$1" cn="$2"
    key "$name"
    [[ -f "$name.pem" ]] && return
    openssl req -x509 -new -sha256 -days "$DAYS" -key "$name-key.pem" -out "$name.pem" \
        -subj "/O=Cirrus Development/CN=$cn" \
        -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -addext "subjectKeyIdentifier=hash"
}

# leaf NAME CA SUBJECT EXTENSIONS: a leaf certificate signed by CA. NAME.pem is the
# chain sent to peers: the leaf, then intermediates (none here). The root stays
# out, as peers must already trust it, so an untrusted peer reads "unable to get
# local issuer certificate".
leaf() {
    local name="$1" issuer="$2" subject="$3" extensions="$4"
    key "$name"
    # Kept only while it still verifies against its CA (a remade CA remakes its leaves).
    if [[ -f "$name.pem" ]] && openssl verify -CAfile "$issuer.pem" "$name.pem" > /dev/null 2>&1; then
        return
    fi
    printf '%s\n' "$extensions" > "$WORK/$name.ext"
    openssl req -new -sha256 -key "$name-key.pem" -subj "$subject" -out "$WORK/$name.csr"
    openssl x509 -req -sha256 -days "$DAYS" -in "$WORK/$name.csr" \
        -CA "$issuer.pem" -CAkey "$issuer-key.pem" -set_serial "0x$(openssl rand -hex 16)" \
        -extfile "$WORK/$name.ext" -out "$name.pem"
}

SERVER_EXT="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
authorityKeyIdentifier=keyid"

CLIENT_EXT="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth
authorityKeyIdentifier=keyid"

ca ca "Cirrus Development CA"
leaf server ca "/O=Cirrus Development/CN=localhost" "$SERVER_EXT"
# Client subjects are exactly CN=<user record name>: the server maps the CN to the user.
leaf alice ca "/CN=alice" "$CLIENT_EXT"
leaf bob ca "/CN=bob" "$CLIENT_EXT"
# carol's key "leaked": ca-crl-carol.pem revokes her certificate.
leaf carol ca "/CN=carol" "$CLIENT_EXT"
# Certificates whose subjectAltName vouches for email addresses (the user directory's
# verified lookup info): a second certificate of alice's, and dave's.
leaf alice-mail ca "/CN=alice" "$CLIENT_EXT
subjectAltName=email:alice@example.com,email:Alice.Work@example.com"
leaf dave ca "/CN=dave" "$CLIENT_EXT
subjectAltName=email:dave@example.com"

# Revocation lists of the development CA, kept while they still verify (and,
# for carol's, still revoke the carol.pem there is).
if ! openssl crl -in ca-crl.pem -CAfile ca.pem -noout > /dev/null 2>&1; then
    crl ca-crl.pem
fi
if [[ "$(openssl verify -crl_check -CAfile ca.pem -CRLfile ca-crl-carol.pem carol.pem 2>&1 || true)" != *"certificate revoked"* ]]; then
    crl ca-crl-carol.pem carol
fi

# A second CA nobody trusts, for the refusal tests.
ca other-ca "Cirrus Untrusted CA"
leaf mallory other-ca "/CN=mallory" "$CLIENT_EXT"
leaf other-server other-ca "/O=Cirrus Development/CN=localhost" "$SERVER_EXT"

for name in server alice bob carol alice-mail dave; do
    openssl verify -CAfile ca.pem "$name.pem" > /dev/null
done
openssl verify -crl_check -CAfile ca.pem -CRLfile ca-crl.pem alice.pem > /dev/null
for name in mallory other-server; do
    openssl verify -CAfile other-ca.pem "$name.pem" > /dev/null
done
echo "Certificates in $(pwd) are ready."
