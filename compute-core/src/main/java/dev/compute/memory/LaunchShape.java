package dev.compute.memory;

import java.util.Arrays;

/**
 * How many work items a launch runs, in one to three dimensions, and optionally how they are grouped (OpenCL's
 * work-group, CUDA's block). {@code LaunchShape.of(n)} is the common case.
 *
 * <p><b>Rounding.</b> On OpenCL and CUDA every dimension is launched as a whole number of groups: its size is rounded
 * up to a multiple of the group's, so a kernel sees up to a group's worth more work items than asked and must check
 * its index against its element count (as every kernel written for a grid does). A Java kernel is given the shape as
 * asked.
 *
 * <p><b>The group.</b> Without {@link #withWorkGroup}, the backend chooses: 256 work items in one dimension, 16 x 16
 * in two, 8 x 8 x 4 in three, halved (last dimension first) until the kernel's limit allows it
 * ({@code CL_KERNEL_WORK_GROUP_SIZE}, {@code CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK}). A group given is used as it is;
 * one the device refuses fails the launch with the driver's reason.
 */
public final class LaunchShape {

    private static final long[][] DEFAULT_GROUPS = {{256}, {16, 16}, {8, 8, 4}};

    private final long[] sizes;
    private final long[] group;

    private LaunchShape(long[] sizes, long[] group) {
        this.sizes = sizes;
        this.group = group;
    }

    /** {@code x} work items in one dimension. */
    public static LaunchShape of(long x) {
        return new LaunchShape(positive(new long[] {x}, "work items"), new long[0]);
    }

    /** {@code x} by {@code y} work items. */
    public static LaunchShape of(long x, long y) {
        return new LaunchShape(positive(new long[] {x, y}, "work items"), new long[0]);
    }

    /** {@code x} by {@code y} by {@code z} work items. */
    public static LaunchShape of(long x, long y, long z) {
        return new LaunchShape(positive(new long[] {x, y, z}, "work items"), new long[0]);
    }

    /** This shape with work-groups (blocks) of the given sizes, one per dimension of the shape. */
    public LaunchShape withWorkGroup(long... groupSizes) {
        if (groupSizes.length != sizes.length) {
            throw new IllegalArgumentException("a " + sizes.length + "-dimensional shape needs a work-group of " + sizes.length
                    + " size(s); given " + groupSizes.length);
        }
        return new LaunchShape(sizes, positive(groupSizes.clone(), "work-group sizes"));
    }

    /** 1, 2 or 3. */
    public int dimensions() {
        return sizes.length;
    }

    /** The work items asked for in {@code dimension} (0 is x). */
    public long size(int dimension) {
        return sizes[dimension];
    }

    /**
     * The work items asked for in all, the product of the sizes.
     *
     * @throws ArithmeticException where the product passes {@code Long.MAX_VALUE}, naming the shape
     */
    public long totalSize() {
        long total = 1;
        for (long size : sizes) {
            try {
                total = Math.multiplyExact(total, size);
            } catch (ArithmeticException overflow) {
                throw new ArithmeticException(this + " has more than Long.MAX_VALUE work items in all");
            }
        }
        return total;
    }

    /** True when {@link #withWorkGroup} set the grouping; otherwise the backend chooses it. */
    public boolean hasWorkGroup() {
        return group.length > 0;
    }

    /** The work-group's size in {@code dimension}; only where {@link #hasWorkGroup()}. */
    public long workGroup(int dimension) {
        if (group.length == 0) {
            throw new IllegalStateException("this shape leaves the work-group to the backend");
        }
        return group[dimension];
    }

    /**
     * The work-group a backend launches with: the one given, or the default for the dimensions halved (last dimension
     * first) until its product is at most {@code maxWorkItems} (the kernel's limit on the device).
     */
    public long[] workGroupOrDefault(long maxWorkItems) {
        if (group.length > 0) {
            return group.clone();
        }
        long[] chosen = DEFAULT_GROUPS[sizes.length - 1].clone();
        int halve = chosen.length - 1;
        while (product(chosen) > Math.max(1, maxWorkItems)) {
            if (chosen[halve] > 1) {
                chosen[halve] /= 2;
            }
            halve = halve == 0 ? chosen.length - 1 : halve - 1;
        }
        return chosen;
    }

    /**
     * The sizes rounded up to multiples of {@code workGroup}: what a backend launches as its global size.
     *
     * @throws IllegalArgumentException where a size rounded up passes {@code Long.MAX_VALUE}
     */
    public long[] roundedUpTo(long[] workGroup) {
        long[] rounded = new long[sizes.length];
        for (int d = 0; d < sizes.length; d++) {
            long groups = Math.ceilDiv(sizes[d], workGroup[d]);
            if (groups > Long.MAX_VALUE / workGroup[d]) {
                throw new IllegalArgumentException(this + " rounded up to whole work-groups of " + Arrays.toString(workGroup)
                        + " is more than Long.MAX_VALUE work items in dimension " + d);
            }
            rounded[d] = groups * workGroup[d];
        }
        return rounded;
    }

    private static long product(long[] values) {
        long product = 1;
        for (long value : values) {
            product *= value;
        }
        return product;
    }

    private static long[] positive(long[] values, String what) {
        for (long value : values) {
            if (value <= 0) {
                throw new IllegalArgumentException(what + " must be positive: " + Arrays.toString(values));
            }
        }
        return values;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof LaunchShape that && Arrays.equals(sizes, that.sizes) && Arrays.equals(group, that.group);
    }

    @Override
    public int hashCode() {
        return 31 * Arrays.hashCode(sizes) + Arrays.hashCode(group);
    }

    @Override
    public String toString() {
        return "LaunchShape" + Arrays.toString(sizes) + (group.length == 0 ? "" : " in work-groups of " + Arrays.toString(group));
    }
}
