package dev.compute.memory.contract;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.ComputeKernel;
import dev.compute.memory.DataType;
import dev.compute.memory.KernelArg;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Random sequences of ops, kernel launches, host views, accesses and copies on slices (and slices of slices) of two
 * buffers, at every location, against two plain arrays: each step changes exactly its slice's elements, wherever the
 * newer copy of the buffer is (a slice shares its buffer's state, so one slice written on the device and the next
 * through a host view must both survive). The sequences are seeded: a failure names its seed and its last steps.
 */
public abstract class SliceSequenceContractTest {

    private static final String SHIFT_CL = """
            __kernel void shift(__global const float *x, __global float *y, long n, float add) {
                long i = get_global_id(0);
                if (i < n) y[i] = x[i] + add;
            }
            """;

    /** The steps, by the number each is drawn as. */
    private static final List<String> STEP_NAMES = List.of("fill", "scale", "axpy from the other buffer", "copyFrom(float[])",
            "a write through hostView()", "a launch reading the other buffer", "a hostAccess", "copyFrom(the other buffer)", "sum");

    /** A fresh manager on the backend under test. */
    protected abstract UnifiedMemoryManager newManager();

    /** The locations whose memory the backend's kernels reach. */
    protected Set<MemoryLocation> kernelLocations(UnifiedMemoryManager manager) {
        return Set.copyOf(manager.locations());
    }

    @Test
    void randomStepsOnSlicesChangeExactlyTheirElementsAtEveryLocation() {
        try (UnifiedMemoryManager manager = newManager()) {
            ComputeKernel shift = manager.kernels().compile(KernelSource.openCl(SHIFT_CL, "shift"), KernelSource.java("shift", (shape, args) -> {
                MemorySegment x = args.segment(0);
                MemorySegment y = args.segment(1);
                for (long i = 0; i < args.longValue(2); i++) {
                    y.setAtIndex(JAVA_FLOAT, i, x.getAtIndex(JAVA_FLOAT, i) + args.floatValue(3));
                }
            }));
            List<MemoryLocation> locations = List.copyOf(kernelLocations(manager));
            for (long seed = 0; seed < 200; seed++) {
                run(manager, shift, locations, seed);
            }
        }
    }

    private static void run(UnifiedMemoryManager manager, ComputeKernel shift, List<MemoryLocation> locations, long seed) {
        Random random = new Random(seed);
        MemoryLocation location = locations.get(random.nextInt(locations.size()));
        int n = 64 + random.nextInt(300);
        float[][] model = {new float[n], new float[n]};
        List<String> steps = new ArrayList<>();
        try (UnifiedBuffer first = manager.allocate(DataType.FLOAT32, n, location);
             UnifiedBuffer second = manager.allocate(DataType.FLOAT32, n, location)) {
            UnifiedBuffer[] buffers = {first, second};
            first.copyFrom(model[0]);
            second.copyFrom(model[1]);
            for (int step = 0; step < 80; step++) {
                int target = random.nextInt(2);
                UnifiedBuffer buffer = buffers[target];
                UnifiedBuffer other = buffers[1 - target];
                float[] mine = model[target];
                float[] theirs = model[1 - target];
                int offset = random.nextInt(n - 1);
                int count = 1 + random.nextInt(n - offset);
                UnifiedBuffer slice = buffer.slice(offset, count);
                if (count > 1 && random.nextBoolean()) {
                    int inner = random.nextInt(count - 1);
                    count = 1 + random.nextInt(count - inner);
                    slice = slice.slice(inner, count);
                    offset += inner;
                }
                int from = random.nextInt(n - count + 1);
                float value = random.nextInt(100);
                int kind = random.nextInt(9);
                steps.add(STEP_NAMES.get(kind) + " on buffer " + target + " [" + offset + ", +" + count + ") (other at " + from + ", value " + value + ")");
                switch (kind) {
                    case 0 -> {
                        manager.ops().fill(slice, value);
                        Arrays.fill(mine, offset, offset + count, value);
                    }
                    case 1 -> {
                        manager.ops().scale(slice, 2.0);
                        for (int i = offset; i < offset + count; i++) {
                            mine[i] *= 2;
                        }
                    }
                    case 2 -> {
                        manager.ops().axpy(1.0, other.slice(from, count), slice);
                        for (int i = 0; i < count; i++) {
                            mine[offset + i] += theirs[from + i];
                        }
                    }
                    case 3 -> {
                        float[] values = new float[count];
                        Arrays.fill(values, value);
                        slice.copyFrom(values);
                        Arrays.fill(mine, offset, offset + count, value);
                    }
                    case 4 -> {
                        slice.hostView().setAtIndex(JAVA_FLOAT, count - 1, value);
                        mine[offset + count - 1] = value;
                    }
                    case 5 -> {
                        shift.launch(LaunchShape.of(count), KernelArg.read(other.slice(from, count)), KernelArg.write(slice), (long) count, value);
                        for (int i = 0; i < count; i++) {
                            mine[offset + i] = theirs[from + i] + value;
                        }
                    }
                    case 6 -> {
                        try (BufferAccess access = slice.hostAccess(AccessMode.READ_WRITE)) {
                            access.segment().setAtIndex(JAVA_FLOAT, 0, access.segment().getAtIndex(JAVA_FLOAT, 0) + 1);
                        }
                        mine[offset] += 1;
                    }
                    case 7 -> {
                        slice.copyFrom(other.slice(from, count));
                        System.arraycopy(theirs, from, mine, offset, count);
                    }
                    default -> {
                        double expected = 0;
                        for (int i = offset; i < offset + count; i++) {
                            expected += mine[i];
                        }
                        assertThat(manager.ops().sum(slice)).as("seed %d at %s: the sum after %s", seed, location, last(steps))
                                .isCloseTo(expected, within(1e-3 * Math.max(1, Math.abs(expected))));
                    }
                }
                if (random.nextInt(4) == 0 || step == 79) {
                    float[] read = new float[n];
                    first.copyTo(read);
                    assertThat(read).as("seed %d at %s: the first buffer after %s", seed, location, last(steps)).containsExactly(model[0]);
                    second.copyTo(read);
                    assertThat(read).as("seed %d at %s: the second buffer after %s", seed, location, last(steps)).containsExactly(model[1]);
                }
            }
        }
    }

    private static List<String> last(List<String> steps) {
        return steps.subList(Math.max(0, steps.size() - 6), steps.size());
    }
}
