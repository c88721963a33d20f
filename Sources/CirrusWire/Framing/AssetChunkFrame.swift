public import NIOCore

extension FrameEncoder {
    /// `Frame.stream_id` (field 1) and `Event.seq` (field 1) and `AssetChunk.offset` (field 1):
    /// varints.
    private static let firstVarintKey: UInt8 = 1 << 3
    /// `Frame.event`: field 5, length-delimited.
    private static let frameEventKey: UInt8 = 5 << 3 | 2
    /// `Event.download_asset`: field 52, length-delimited, a two-byte varint key.
    private static let downloadAssetKey: UInt64 = 52 << 3 | 2
    /// `DownloadAssetEvent.chunk`: field 1, length-delimited.
    private static let chunkKey: UInt8 = 1 << 3 | 2
    /// `AssetChunk.data`: field 2, length-delimited.
    private static let dataKey: UInt8 = 2 << 3 | 2

    /// The nested sizes of `Frame{stream_id, event{seq, download_asset{chunk{offset, data}}}}`
    /// whose data is `dataBytes` long: what each length prefix says.
    private struct AssetChunkSizes {
        var chunk: Int
        var downloadEvent: Int
        var event: Int
        var frame: Int

        init(streamID: UInt64, seq: UInt64, offset: UInt64, dataBytes: Int) {
            // protobuf-c leaves out proto3 scalars and bytes at their defaults (0, empty);
            // a oneof member is always written, empty or not.
            self.chunk = (offset == 0 ? 0 : 1 + varintSize(offset))
                + (dataBytes == 0 ? 0 : 1 + varintSize(UInt64(dataBytes)) + dataBytes)
            self.downloadEvent = 1 + varintSize(UInt64(self.chunk)) + self.chunk
            self.event = (seq == 0 ? 0 : 1 + varintSize(seq))
                + varintSize(FrameEncoder.downloadAssetKey) + varintSize(UInt64(self.downloadEvent)) + self.downloadEvent
            self.frame = (streamID == 0 ? 0 : 1 + varintSize(streamID))
                + 1 + varintSize(UInt64(self.event)) + self.event
        }
    }

    /// The body size (without the length prefix) of the frame carrying one `DownloadAsset`
    /// chunk event: what ``encode(_:into:maximumFrameBytes:)`` would write for it.
    public static func assetChunkFrameBodySize(streamID: UInt64, seq: UInt64, offset: UInt64, dataBytes: Int) -> Int {
        AssetChunkSizes(streamID: streamID, seq: seq, offset: offset, dataBytes: dataBytes).frame
    }

    /// Appends the length prefix and every byte of
    /// `Frame{stream_id, event{seq, download_asset{chunk{offset, data}}}}` up to the chunk's
    /// data, which the caller sends right after as it is: the same bytes
    /// ``encode(_:into:maximumFrameBytes:)`` writes for that frame, without copying a
    /// megabyte of file content through protobuf-c twice.
    ///
    /// For example:
    /// ```swift
    /// try FrameEncoder.encodeAssetChunkHeader(
    ///     streamID: 3, seq: 1, offset: 0, dataBytes: chunk.readableBytes, into: &header)
    /// // write `header`, then `chunk`
    /// ```
    ///
    /// - throws: ``WireError/Code/messageTooLarge`` (and writes nothing) when the frame body
    ///   would exceed `maximumFrameBytes`.
    public static func encodeAssetChunkHeader(
        streamID: UInt64,
        seq: UInt64,
        offset: UInt64,
        dataBytes: Int,
        into buffer: inout ByteBuffer,
        maximumFrameBytes: Int = FrameDecoder.defaultMaximumFrameBytes
    ) throws(WireError) {
        let sizes = AssetChunkSizes(streamID: streamID, seq: seq, offset: offset, dataBytes: dataBytes)
        guard sizes.frame <= maximumFrameBytes else {
            throw WireError(
                code: .messageTooLarge,
                message: "frame of \(sizes.frame) bytes exceeds the maximum of \(maximumFrameBytes) bytes"
            )
        }
        buffer.writeInteger(UInt32(sizes.frame))
        if streamID != 0 {
            buffer.writeInteger(Self.firstVarintKey)
            ProtobufVarint.write(streamID, to: &buffer)
        }
        buffer.writeInteger(Self.frameEventKey)
        ProtobufVarint.write(UInt64(sizes.event), to: &buffer)
        if seq != 0 {
            buffer.writeInteger(Self.firstVarintKey)
            ProtobufVarint.write(seq, to: &buffer)
        }
        ProtobufVarint.write(Self.downloadAssetKey, to: &buffer)
        ProtobufVarint.write(UInt64(sizes.downloadEvent), to: &buffer)
        buffer.writeInteger(Self.chunkKey)
        ProtobufVarint.write(UInt64(sizes.chunk), to: &buffer)
        if offset != 0 {
            buffer.writeInteger(Self.firstVarintKey)
            ProtobufVarint.write(offset, to: &buffer)
        }
        if dataBytes != 0 {
            buffer.writeInteger(Self.dataKey)
            ProtobufVarint.write(UInt64(dataBytes), to: &buffer)
        }
    }
}

/// The bytes of `value` as a protobuf varint.
private func varintSize(_ value: UInt64) -> Int {
    max(1, (64 - value.leadingZeroBitCount + 6) / 7)
}
