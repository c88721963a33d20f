internal import COpenSSL
