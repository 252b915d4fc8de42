package dev.compute.memory.spi;

import dev.compute.memory.DataType;

/** {@code count} elements of {@code type} at {@code offset} bytes into an allocation: what a kernel works on. */
public record Region(NativeAllocation allocation, long offset, long count, DataType type) {

    public long byteSize() {
        return type.bytesFor(count);
    }
}
