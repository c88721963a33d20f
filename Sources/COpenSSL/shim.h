#ifndef CIRRUS_COPENSSL_SHIM_H
#define CIRRUS_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#endif
