#ifndef CIRRUS_CPROTOBUFC_SHIM_H
#define CIRRUS_CPROTOBUFC_SHIM_H
#include <protobuf-c/protobuf-c.h>
#endif
