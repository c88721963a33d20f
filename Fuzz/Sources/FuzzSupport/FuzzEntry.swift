/// The signature of libFuzzer's `LLVMFuzzerInitialize` arguments, for the targets' hooks.
public typealias FuzzArgc = UnsafeMutablePointer<CInt>
public typealias FuzzArgv = UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
