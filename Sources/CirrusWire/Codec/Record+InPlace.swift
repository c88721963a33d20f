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

    /// Whether a field holds an asset or a list of assets.
    public var hasAssets: Bool {
        self.hasField { kind in
            switch kind {
            case .assetValue, .assetList: true
            default: false
            }
        }
    }

    /// Whether a field holds a reference or a list of references.
    public var hasReferences: Bool {
        self.hasField { kind in
            switch kind {
            case .referenceValue, .referenceList: true
            default: false
            }
        }
    }

    /// Whether a field's value is of a kind `test` accepts, each field read in place: walking
    /// `fields` by element copies each field (a retain of its key and of its value) only to look
    /// at it.
    private func hasField(where test: (Wire.FieldValue.Kind) -> Bool) -> Bool {
        self._storage.fields.pointee.fields.withUnsafeBufferPointer { fields in
            for index in fields.indices where fields[index].value?.kind.map({ test($0) }) ?? false {
                return true
            }
            return false
        }
    }
}
