package dev.compute.memory;

/** Element types a buffer can be allocated by; the op set works on {@link #FLOAT32} and {@link #FLOAT64}. */
public enum DataType {
    INT8(1), INT16(2), INT32(4), INT64(8), FLOAT16(2), BFLOAT16(2), FLOAT32(4), FLOAT64(8);

    private final int byteSize;

    DataType(int byteSize) {
        this.byteSize = byteSize;
    }

    public int byteSize() {
        return byteSize;
    }

    /** Bytes for {@code count} elements; fails clearly on a negative count or an overflowing product. */
    public long bytesFor(long count) {
        if (count < 0) {
            throw new IllegalArgumentException("element count must not be negative: " + count);
        }
        try {
            return Math.multiplyExact(count, (long) byteSize);
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException(count + " elements of " + this + " (" + byteSize
                    + " bytes each) overflow a 64-bit byte count", e);
        }
    }
}
