package dev.compute.memory.spi;

import static java.lang.foreign.ValueLayout.JAVA_DOUBLE_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED;

import dev.compute.memory.DataType;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;

/**
 * The op set as plain loops over host memory, on the caller's thread; every future is complete when returned. The
 * CPU backend's ops, and what a device backend runs for memory its kernels cannot reach (CUDA's HOST memory).
 * Counted loops over a segment are what C2 vectorises, so no Vector API (still incubating in Java 25) is
 * needed. Unaligned layouts, because the pool may place a block at any byte offset.
 *
 * <p>FLOAT32 arithmetic is done in float, as a GPU kernel would, with {@code alpha} rounded to float once;
 * {@link #sum} accumulates in double, in four interleaved partial sums (which lets the loop pipeline; the
 * result may differ from a strict left-to-right sum in the last bits).
 */
public final class HostKernelOps implements KernelOps {

    @Override
    public CompletableFuture<Void> fill(Region target, double value) {
        MemorySegment s = segment(target);
        long n = target.count();
        if (Double.doubleToRawLongBits(value) == 0L) {
            s.fill((byte) 0);
        } else if (target.type() == DataType.FLOAT32) {
            float v = (float) value;
            for (long i = 0; i < n; i++) {
                s.setAtIndex(JAVA_FLOAT_UNALIGNED, i, v);
            }
        } else {
            for (long i = 0; i < n; i++) {
                s.setAtIndex(JAVA_DOUBLE_UNALIGNED, i, value);
            }
        }
        return done();
    }

    @Override
    public CompletableFuture<Void> scale(Region x, double alpha) {
        MemorySegment s = segment(x);
        long n = x.count();
        if (x.type() == DataType.FLOAT32) {
            float a = (float) alpha;
            for (long i = 0; i < n; i++) {
                s.setAtIndex(JAVA_FLOAT_UNALIGNED, i, a * s.getAtIndex(JAVA_FLOAT_UNALIGNED, i));
            }
        } else {
            for (long i = 0; i < n; i++) {
                s.setAtIndex(JAVA_DOUBLE_UNALIGNED, i, alpha * s.getAtIndex(JAVA_DOUBLE_UNALIGNED, i));
            }
        }
        return done();
    }

    @Override
    public CompletableFuture<Void> axpy(double alpha, Region x, Region y) {
        if (x.type() != y.type() || x.count() != y.count()) {
            throw new IllegalArgumentException("axpy needs x and y of one type and length: x is " + x.count() + " x " + x.type()
                    + ", y is " + y.count() + " x " + y.type());
        }
        MemorySegment xs = segment(x);
        MemorySegment ys = segment(y);
        long n = x.count();
        if (x.type() == DataType.FLOAT32) {
            float a = (float) alpha;
            for (long i = 0; i < n; i++) {
                ys.setAtIndex(JAVA_FLOAT_UNALIGNED, i, a * xs.getAtIndex(JAVA_FLOAT_UNALIGNED, i) + ys.getAtIndex(JAVA_FLOAT_UNALIGNED, i));
            }
        } else {
            for (long i = 0; i < n; i++) {
                ys.setAtIndex(JAVA_DOUBLE_UNALIGNED, i, alpha * xs.getAtIndex(JAVA_DOUBLE_UNALIGNED, i) + ys.getAtIndex(JAVA_DOUBLE_UNALIGNED, i));
            }
        }
        return done();
    }

    @Override
    public CompletableFuture<Double> sum(Region x) {
        MemorySegment s = segment(x);
        long n = x.count();
        double s0 = 0;
        double s1 = 0;
        double s2 = 0;
        double s3 = 0;
        long i = 0;
        if (x.type() == DataType.FLOAT32) {
            for (; i + 4 <= n; i += 4) {
                s0 += s.getAtIndex(JAVA_FLOAT_UNALIGNED, i);
                s1 += s.getAtIndex(JAVA_FLOAT_UNALIGNED, i + 1);
                s2 += s.getAtIndex(JAVA_FLOAT_UNALIGNED, i + 2);
                s3 += s.getAtIndex(JAVA_FLOAT_UNALIGNED, i + 3);
            }
            for (; i < n; i++) {
                s0 += s.getAtIndex(JAVA_FLOAT_UNALIGNED, i);
            }
        } else {
            for (; i + 4 <= n; i += 4) {
                s0 += s.getAtIndex(JAVA_DOUBLE_UNALIGNED, i);
                s1 += s.getAtIndex(JAVA_DOUBLE_UNALIGNED, i + 1);
                s2 += s.getAtIndex(JAVA_DOUBLE_UNALIGNED, i + 2);
                s3 += s.getAtIndex(JAVA_DOUBLE_UNALIGNED, i + 3);
            }
            for (; i < n; i++) {
                s0 += s.getAtIndex(JAVA_DOUBLE_UNALIGNED, i);
            }
        }
        return CompletableFuture.completedFuture((s0 + s1) + (s2 + s3));
    }

    /**
     * A completed future of its own for each call: the caller may do anything to it ({@code obtrudeException} in its
     * error recovery), which must not fail every other caller's op, as one shared instance would.
     */
    private static CompletableFuture<Void> done() {
        return CompletableFuture.completedFuture(null);
    }

    /** The region's bytes; FLOAT32 and FLOAT64 only. */
    private static MemorySegment segment(Region region) {
        if (region.type() != DataType.FLOAT32 && region.type() != DataType.FLOAT64) {
            throw new IllegalArgumentException("the op set works on FLOAT32 and FLOAT64; this region is " + region.type());
        }
        MemorySegment host = region.allocation().hostSegment();
        if (host == null) {
            throw new IllegalArgumentException("not host memory (the allocation has no host segment): " + region.allocation());
        }
        return host.asSlice(region.offset(), region.byteSize());
    }
}
