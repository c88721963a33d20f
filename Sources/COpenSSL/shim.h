#ifndef CIRRUS_COPENSSL_SHIM_H
#define CIRRUS_COPENSSL_SHIM_H

// OpenSSL 3.x for CirrusTLS (and libcrypto's SHA-256, HMAC and random bytes for CirrusWire),
// plus `static inline` wrappers for what Swift cannot import: function-like
// macros and a C callback. Every wrapper is prefixed `cirrus_` and does nothing
// but call through.

#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/buffer.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

// MARK: Process-wide set-up.

/// Initializes OpenSSL without the exit handler it otherwise registers at its first use. That
/// handler frees OpenSSL's global state, its locks among it, while the process's other threads
/// still run: an event loop's timer, a late TLS read or a digest on another thread then takes a
/// freed lock and the process crashes on its way out (a test run did, after every test had
/// passed; a `cirrusd` stopping could too). Only a process's first initialization decides, so
/// every Cirrus entry into OpenSSL (TLS contexts, digests, HMACs, random bytes) calls this
/// before anything else. After the first call in a module it costs one atomic load.
static inline void cirrus_openssl_prepare(void) {
    static int prepared = 0;
    if (__atomic_load_n(&prepared, __ATOMIC_ACQUIRE)) {
        return;
    }
    OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
    __atomic_store_n(&prepared, 1, __ATOMIC_RELEASE);
}

// MARK: SSL_CTX settings (macros over SSL_CTX_ctrl).

static inline int cirrus_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

static inline int cirrus_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}

static inline long cirrus_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

static inline long cirrus_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}

static inline uint64_t cirrus_SSL_CTX_set_options(SSL_CTX *ctx, uint64_t options) {
    return SSL_CTX_set_options(ctx, options);
}

static inline int cirrus_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *groups) {
    return (int)SSL_CTX_set1_groups_list(ctx, groups);
}

static const uint64_t cirrus_SSL_OP_NO_COMPRESSION = SSL_OP_NO_COMPRESSION;
static const uint64_t cirrus_SSL_OP_NO_RENEGOTIATION = SSL_OP_NO_RENEGOTIATION;
static const long cirrus_SSL_MODE_RELEASE_BUFFERS = SSL_MODE_RELEASE_BUFFERS;
static const long cirrus_SSL_MODE_NO_AUTO_CHAIN = SSL_MODE_NO_AUTO_CHAIN;
static const long cirrus_SSL_SESS_CACHE_OFF = SSL_SESS_CACHE_OFF;
static const long cirrus_SSL_SESS_CACHE_CLIENT = SSL_SESS_CACHE_CLIENT;
static const long cirrus_SSL_SESS_CACHE_NO_INTERNAL_STORE = SSL_SESS_CACHE_NO_INTERNAL_STORE;
static const unsigned long cirrus_X509_V_FLAG_CRL_CHECK = X509_V_FLAG_CRL_CHECK;
static const unsigned long cirrus_XN_FLAG_RFC2253 = XN_FLAG_RFC2253;

// MARK: SSL settings.

static inline int cirrus_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

// MARK: BIOs.

static inline size_t cirrus_BIO_pending(BIO *bio) {
    return BIO_ctrl_pending(bio);
}

/// The bytes a memory BIO has allocated (its `BUF_MEM.max`), 0 if unknown.
static inline size_t cirrus_BIO_mem_capacity(BIO *bio) {
    BUF_MEM *memory = NULL;
    if (BIO_get_mem_ptr(bio, &memory) <= 0 || memory == NULL) {
        return 0;
    }
    return memory->max;
}

// MARK: Errors and memory.

static inline int cirrus_ERR_GET_LIB(unsigned long error) {
    return ERR_GET_LIB(error);
}

static inline int cirrus_ERR_GET_REASON(unsigned long error) {
    return ERR_GET_REASON(error);
}

static const int cirrus_ERR_LIB_SSL = ERR_LIB_SSL;
static const int cirrus_SSL_AD_REASON_OFFSET = SSL_AD_REASON_OFFSET;
static const int cirrus_SSL_R_NO_APPLICATION_PROTOCOL = SSL_R_NO_APPLICATION_PROTOCOL;
static const int cirrus_SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL = SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL;

static inline void cirrus_OPENSSL_free(void *pointer) {
    OPENSSL_free(pointer);
}

// MARK: ALPN on the server.

/// A server's protocols in ALPN wire format (length-prefixed names), owned by
/// the Swift `TLSContext` and outliving every SSL made from its SSL_CTX.
typedef struct {
    unsigned int length;
    const unsigned char *bytes;
} cirrus_alpn_protocols;

static inline int cirrus_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                     const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl;
    const cirrus_alpn_protocols *server = (const cirrus_alpn_protocols *)arg;
    unsigned char *selected = NULL;
    unsigned char selectedLength = 0;
    if (server == NULL || server->length == 0 || inlen == 0) {
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    // Picks the first of the server's protocols that the client also offered.
    if (SSL_select_next_proto(&selected, &selectedLength, server->bytes, server->length, in, inlen)
        != OPENSSL_NPN_NEGOTIATED) {
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    *out = selected;
    *outlen = selectedLength;
    return SSL_TLSEXT_ERR_OK;
}

/// Installs `cirrus_alpn_select`: a client offering ALPN with no protocol in
/// common gets a fatal `no_application_protocol` alert.
static inline void cirrus_SSL_CTX_set_alpn_select(SSL_CTX *ctx, const cirrus_alpn_protocols *protocols) {
    SSL_CTX_set_alpn_select_cb(ctx, cirrus_alpn_select, (void *)protocols);
}

// MARK: Requiring ALPN on the server.

/// A ClientHello callback refusing a client that offers no ALPN at all (the
/// ALPN select callback is not called then): the client gets a fatal
/// `no_application_protocol` alert and the server's error queue names the
/// same reason as when no protocol is in common.
static inline int cirrus_require_alpn(SSL *ssl, int *alert, void *arg) {
    (void)arg;
    const unsigned char *extension = NULL;
    size_t length = 0;
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &extension, &length) != 1
        || length == 0) {
        ERR_raise(ERR_LIB_SSL, SSL_R_NO_APPLICATION_PROTOCOL);
        *alert = SSL_AD_NO_APPLICATION_PROTOCOL;
        return SSL_CLIENT_HELLO_ERROR;
    }
    return SSL_CLIENT_HELLO_SUCCESS;
}

static inline void cirrus_SSL_CTX_require_alpn(SSL_CTX *ctx) {
    SSL_CTX_set_client_hello_cb(ctx, cirrus_require_alpn, NULL);
}

// MARK: subjectAltName (the stack macros over OPENSSL_sk_*).

/// The certificate's subjectAltName entries (free with cirrus_GENERAL_NAMES_free), or NULL.
static inline GENERAL_NAMES *cirrus_X509_subject_alt_names(X509 *x509) {
    return (GENERAL_NAMES *)X509_get_ext_d2i(x509, NID_subject_alt_name, NULL, NULL);
}

static inline int cirrus_sk_GENERAL_NAME_num(const GENERAL_NAMES *names) {
    return sk_GENERAL_NAME_num(names);
}

/// The index-th entry's email address (rfc822Name), or NULL when it is another kind of name.
static inline const ASN1_IA5STRING *cirrus_GENERAL_NAME_email(const GENERAL_NAMES *names, int index) {
    const GENERAL_NAME *name = sk_GENERAL_NAME_value(names, index);
    return (name != NULL && name->type == GEN_EMAIL) ? name->d.rfc822Name : NULL;
}

static inline void cirrus_GENERAL_NAMES_free(GENERAL_NAMES *names) {
    GENERAL_NAMES_free(names);
}

#endif
