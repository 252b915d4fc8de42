package dev.compute.memory.cuda;

import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.Region;
import java.lang.foreign.MemorySegment;

/** Argument checks shared by copies and kernels: cheap, and what keeps a bad offset from reaching the driver. */
final class Checks {
    private Checks() {}

    /** {@code [offset, offset + bytes)} lies inside {@code allocation}. */
    static void range(NativeAllocation allocation, long offset, long bytes, String name) {
        if (offset < 0 || bytes < 0 || offset > allocation.sizeBytes() - bytes) {
            throw new IndexOutOfBoundsException(name + " range [" + offset + ", " + offset + " + " + bytes
                    + ") is outside its allocation of " + allocation.sizeBytes() + " bytes");
        }
    }

    /** A host segment holds at least {@code bytes}. */
    static void segment(MemorySegment segment, long bytes, String name) {
        if (bytes < 0 || segment.byteSize() < bytes) {
            throw new IndexOutOfBoundsException(name + " segment of " + segment.byteSize() + " bytes cannot take a copy of " + bytes + " bytes");
        }
    }

    /** A region a kernel can run on: FLOAT32 or FLOAT64, device-visible, aligned and inside its allocation. */
    static void region(Region region, String name) {
        DataType type = region.type();
        if (type != DataType.FLOAT32 && type != DataType.FLOAT64) {
            throw new IllegalArgumentException("the op set works on FLOAT32 and FLOAT64; " + name + " is " + type);
        }
        if (region.count() < 0) {
            throw new IllegalArgumentException(name + " has a negative element count: " + region.count());
        }
        NativeAllocation allocation = region.allocation();
        if (allocation.location() == MemoryLocation.HOST) {
            throw new IllegalArgumentException(name + " is in HOST memory, which a CUDA kernel cannot reach; use DEVICE, UNIFIED or PINNED");
        }
        if (region.offset() % type.byteSize() != 0) {
            throw new IllegalArgumentException(name + " starts at byte " + region.offset() + ", not a multiple of the "
                    + type.byteSize() + "-byte " + type + " element");
        }
        range(allocation, region.offset(), region.byteSize(), name);
    }

    /** Two regions an element-wise kernel pairs up. */
    static void sameShape(Region x, Region y) {
        if (x.type() != y.type() || x.count() != y.count()) {
            throw new IllegalArgumentException("x and y need one type and length: x is " + x.count() + " x " + x.type()
                    + ", y is " + y.count() + " x " + y.type());
        }
    }
}
