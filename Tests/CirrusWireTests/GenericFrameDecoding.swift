@testable import CirrusWire

/// The frame `body` decodes to the generic way (nesting check, protobuf-c, conversion), or nil
/// when that refuses it: what the readers that skip it (`SaveEventReader`, `SaveRequestReader`)
/// must return, or leave to it.
func genericallyDecodedFrame(_ body: [UInt8]) -> Wire.Frame? {
    body.withUnsafeBytes { bytes in
        try? WireArena.withScratch { (arena) throws(WireError) in try WireCodec.decode(Wire.Frame.self, from: bytes, arena: arena) }
    }
}
