"""Runs sslyze with every handshake offering ALPN `cirrus/1`.

cirrusd refuses a client that offers no ALPN (no_application_protocol alert),
and sslyze has no option to offer it: its TLS library, nassl, compiles
OpenSSL's SSL_set_alpn_protos in but does not expose it to Python. This calls
that function, found in nassl's symbol table, on each SSL object nassl makes,
then runs sslyze's command line unchanged. Pinned to the nassl version
Scripts/tls-scan.sh installs: the SSL pointer sits right after the Python
object header of nassl's SSL objects.

    python sslyze_alpn.py [sslyze arguments...]
"""

import ctypes
import sys

from elftools.elf.elffile import ELFFile

ALPN = b"\x08cirrus/1"


def _function_address(module_path: str, symbol: str) -> int:
    with open(module_path, "rb") as stream:
        table = ELFFile(stream).get_section_by_name(".symtab")
        if table is None:
            raise SystemExit(f"{module_path} has no symbol table; cannot offer ALPN")
        found = table.get_symbol_by_name(symbol)
        if not found:
            raise SystemExit(f"{symbol} not found in {module_path}; cannot offer ALPN")
        offset = found[0]["st_value"]
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == module_path and int(fields[2], 16) == 0:
                return int(fields[0].split("-")[0], 16) + offset
    raise SystemExit(f"{module_path} is not mapped; cannot offer ALPN")


def _install() -> None:
    from nassl import ssl_client

    set_alpn_by_module = {}

    def set_alpn(client) -> None:
        module = type(client)._NASSL_MODULE
        setter = set_alpn_by_module.get(module.__file__)
        if setter is None:
            address = _function_address(module.__file__, "SSL_set_alpn_protos")
            prototype = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint)
            setter = prototype(address)
            set_alpn_by_module[module.__file__] = setter
        # nassl's SSL object: PyObject_HEAD, then the SSL pointer.
        ssl = ctypes.c_void_p.from_address(id(client._ssl) + object.__basicsize__).value
        if not ssl or setter(ssl, ALPN, len(ALPN)) != 0:
            raise SystemExit("SSL_set_alpn_protos failed")

    original = ssl_client.BaseSslClient.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        set_alpn(self)

    ssl_client.BaseSslClient.__init__ = init


if __name__ == "__main__":
    _install()
    from sslyze.__main__ import main

    sys.argv[0] = "sslyze"
    main()
