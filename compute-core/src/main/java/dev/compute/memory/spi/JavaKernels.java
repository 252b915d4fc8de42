package dev.compute.memory.spi;

import dev.compute.memory.JavaKernel;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;

/**
 * {@link KernelSource.Language#JAVA} kernels for a backend whose memory the host reaches: the kernel runs on the
 * launching thread, over each buffer argument's bytes, which {@code bytes} finds for the backend (the access's host
 * segment on the CPU; the device copy on the simulated device). READ arguments are handed over read-only, and every
 * segment is bound to the launch (a confined arena closed when the body returns): one kept past the launch, or handed
 * to another thread, fails rather than reach memory the buffer may have given back.
 */
public final class JavaKernels {
    private JavaKernels() {}

    /** The kernel of a Java {@code source}, its buffers' bytes found by {@code bytes}. */
    public static NativeKernel compile(KernelSource source, Function<KernelArgument.Buffer, MemorySegment> bytes) {
        Objects.requireNonNull(bytes, "bytes");
        JavaKernel body = source.javaBody();
        String name = source.name();
        return new NativeKernel() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public CompletableFuture<Void> launch(LaunchShape shape, List<KernelArgument> arguments) {
                try (Arena launch = Arena.ofConfined()) {
                    body.run(shape, new Arguments(name, arguments, bytes, launch));
                    return CompletableFuture.completedFuture(null);
                } catch (Throwable e) { // any: a checked exception thrown where javac does not see it (Kotlin, @SneakyThrows) too
                    return CompletableFuture.failedFuture(e);
                }
            }

            @Override
            public String toString() {
                return source.toString();
            }
        };
    }

    private record Arguments(String kernel, List<KernelArgument> arguments, Function<KernelArgument.Buffer, MemorySegment> bytes,
                             Arena launch) implements JavaKernel.Arguments {

        @Override
        public int count() {
            return arguments.size();
        }

        @Override
        public MemorySegment segment(int index) {
            if (!(argument(index) instanceof KernelArgument.Buffer buffer)) {
                throw notA(index, "buffer");
            }
            MemorySegment segment = bytes.apply(buffer).reinterpret(launch, null);
            return buffer.mode().writes() ? segment : segment.asReadOnly();
        }

        @Override
        public int intValue(int index) {
            return scalar(index, Integer.class, "an Integer (int)");
        }

        @Override
        public long longValue(int index) {
            return scalar(index, Long.class, "a Long (long)");
        }

        @Override
        public float floatValue(int index) {
            return scalar(index, Float.class, "a Float (float)");
        }

        @Override
        public double doubleValue(int index) {
            return scalar(index, Double.class, "a Double (double)");
        }

        private <T> T scalar(int index, Class<T> type, String what) {
            if (argument(index) instanceof KernelArgument.Scalar(Object value) && type.isInstance(value)) {
                return type.cast(value);
            }
            throw notA(index, what);
        }

        private KernelArgument argument(int index) {
            if (index < 0 || index >= arguments.size()) {
                throw new IndexOutOfBoundsException("Java kernel '" + kernel + "' asked for argument " + index + "; the launch passed "
                        + arguments.size());
            }
            return arguments.get(index);
        }

        private IllegalArgumentException notA(int index, String what) {
            KernelArgument argument = arguments.get(index);
            String actual = switch (argument) {
                case KernelArgument.Buffer buffer -> "a buffer (" + buffer.description() + ")";
                case KernelArgument.Scalar(Object value) -> KernelArgument.typeOf(value) + " (" + value + ")";
            };
            return new IllegalArgumentException("Java kernel '" + kernel + "' reads argument " + index + " as " + what
                    + ", but the launch passed " + actual);
        }
    }
}
