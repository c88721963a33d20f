/// Where the current task may run SQLite reads.
///
/// A read in place (``SQLiteStorage``'s bounded reads of a few rows by key) holds the calling
/// thread while SQLite reads, which may wait for the disk. That is right on a cooperative
/// thread and wrong on a server's event loop, which must never block on storage: the server
/// runs some operations on their connection's event loop and sets ``mayReadInPlace`` to false
/// for them, so their reads go to a reader's queue instead.
public enum ReadPlacement {
    /// Whether reads may run on the calling thread (true unless the caller says otherwise).
    @TaskLocal public static var mayReadInPlace = true
}
