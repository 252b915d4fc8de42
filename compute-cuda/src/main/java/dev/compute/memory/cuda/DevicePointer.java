package dev.compute.memory.cuda;

import jcuda.driver.CUdeviceptr;

/**
 * A JCuda {@code CUdeviceptr} for a raw device address, and the raw address of one JCuda filled in. JCuda passes
 * {@code nativePointer + byteOffset} to the driver for every pointer argument ({@code PointerUtils.getPointer}),
 * which is what {@code withByteOffset} relies on; an address is carried as a byte offset from null. Addresses
 * under unified addressing (every 64-bit Linux CUDA context) name device, managed and pinned host memory alike.
 */
final class DevicePointer extends CUdeviceptr {

    private static final CUdeviceptr NULL = new CUdeviceptr();

    /** An empty pointer for JCuda to fill ({@code cuMemAlloc}, {@code cuMemAllocManaged}). */
    DevicePointer() {}

    DevicePointer(long address) {
        super(NULL, address);
    }

    long address() {
        return getNativePointer() + getByteOffset();
    }
}
