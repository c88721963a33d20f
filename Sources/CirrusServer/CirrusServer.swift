import CirrusWire
import CirrusTLS
