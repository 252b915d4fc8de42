package dev.compute.memory;

import java.math.BigDecimal;

/**
 * A cap on the memory a location may reserve ({@code compute.memory.pooling.max-pool-size}): a number of bytes, or a
 * share of the device's total memory ({@code 80%}, as PyTorch's per-process memory fraction), resolved when the
 * manager starts against {@link DeviceMemoryInfo#totalBytes()} (the device's global memory on OpenCL, the GPU's on
 * CUDA, the machine's memory, or the container's limit where lower, on the CPU). {@link ManagerSettings} reports
 * the bytes it resolved to and the share they came from. The builder checks the value: bytes positive, a share above
 * 0 and at most 1.
 */
public sealed interface PoolSize {

    /** {@code bytes} bytes. */
    static PoolSize ofBytes(long bytes) {
        return new Bytes(bytes);
    }

    /** {@code share} of the device's total memory: 0.8 for 80%. */
    static PoolSize ofShare(double share) {
        return new Share(share);
    }

    /** A size in bytes. */
    record Bytes(long bytes) implements PoolSize {
        @Override
        public String toString() {
            return bytes + " bytes";
        }
    }

    /** A share of the device's total memory, 0.8 for 80%. */
    record Share(double share) implements PoolSize {
        /** As it is written in {@code application.yml}: {@code 80%}. */
        @Override
        public String toString() {
            return Double.isFinite(share) ? BigDecimal.valueOf(share).movePointRight(2).stripTrailingZeros().toPlainString() + "%" : share + " (not a share)";
        }

        /** The bytes this share is of {@code totalBytes}, rounded down. */
        public long of(long totalBytes) {
            return BigDecimal.valueOf(totalBytes).multiply(BigDecimal.valueOf(share)).longValue();
        }
    }
}
