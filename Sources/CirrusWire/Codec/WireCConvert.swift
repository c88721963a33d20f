internal import CProtobufC

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Conversions from the fields of structs unpacked by protobuf-c to Swift.
/// Each accepts NULL (absent) and never traps on what a peer sent.
enum WireCConvert {
    /// The string of a NUL-terminated protobuf-c string; invalid UTF-8 is
    /// repaired with U+FFFD. protobuf-c strings end at their first NUL.
    static func string(_ pointer: UnsafeMutablePointer<CChar>?) -> String {
        guard let pointer else { return "" }
        return string(UnsafeRawBufferPointer(start: pointer, count: strlen(pointer)))
    }

    /// The string of `bytes` (invalid UTF-8 repaired with U+FFFD): the one the form above gives
    /// for the same bytes NUL-terminated.
    static func string(_ bytes: UnsafeRawBufferPointer) -> String {
        // CloudKit's name of the current user's zones, in nearly every record ID a client sends
        // or receives: one byte too long to be stored inline (15), it would be a heap string
        // each time; the literal is never allocated or freed.
        if bytes.count == Self.currentUserZoneOwner.utf8CodeUnitCount, let base = bytes.baseAddress,
            memcmp(base, Self.currentUserZoneOwner.utf8Start, bytes.count) == 0
        {
            return Self.currentUserZoneOwnerString
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static let currentUserZoneOwner: StaticString = "__defaultOwner__"
    private static let currentUserZoneOwnerString = "__defaultOwner__"

    static func bytes(_ data: ProtobufCBinaryData) -> [UInt8] {
        guard let base = data.data, data.len > 0 else { return [] }
        return [UInt8](UnsafeBufferPointer(start: base, count: data.len))
    }

    /// `count` elements at `base`, each converted by `transform`.
    static func array<CElement, Element>(
        _ base: UnsafeMutablePointer<CElement>?,
        count: Int,
        _ transform: (CElement) -> Element
    ) -> [Element] {
        guard let base, count > 0 else { return [] }
        var result: [Element] = []
        result.reserveCapacity(count)
        for index in 0..<count {
            result.append(transform(base[index]))
        }
        return result
    }

    /// The messages of a repeated message field; NULL elements are skipped.
    static func messages<M: CBackedMessage>(
        _ base: UnsafeMutablePointer<UnsafeMutablePointer<M.CStruct>?>?,
        count: Int
    ) -> [M] {
        guard let base, count > 0 else { return [] }
        var result: [M] = []
        result.reserveCapacity(count)
        for index in 0..<count {
            if let element = base[index] {
                result.append(M(cStruct: element))
            }
        }
        return result
    }
}
