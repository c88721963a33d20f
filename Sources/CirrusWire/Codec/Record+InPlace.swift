extension Wire.Record {
    // Read here, in the module that stores them, the parts below cost no allocation. In another
    // module a read of an optional message part (`recordID`, `parent`, `share`) is a call to
    // its `_read` coroutine, which the optimizer does not always inline, and whose frame, big
    // enough to hold such a part, does not fit the caller's buffer: a malloc and a free per read.

    /// The record's name (`recordID?.recordName`; "" without an ID).
    public var recordName: String {
        self._storage.fields.pointee.recordID?.recordName ?? ""
    }

    /// Whether the record has a parent or is the root of a share (`parent != nil ||
    /// share != nil`).
    public var hasParentOrShare: Bool {
        self._storage.fields.pointee.parent != nil || self._storage.fields.pointee.share != nil
    }
}
