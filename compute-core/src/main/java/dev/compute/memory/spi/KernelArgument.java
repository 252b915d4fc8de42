package dev.compute.memory.spi;

import dev.compute.memory.AccessMode;
import dev.compute.memory.DataType;
import java.lang.foreign.MemorySegment;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/** One argument of a {@link NativeKernel} launch, in the kernel's parameter order: a buffer or a scalar. */
public sealed interface KernelArgument {

    /** The type of a value passed as an argument, with its article ("a Long", "an Integer"), for messages. */
    static String typeOf(Object value) {
        String name = value.getClass().getSimpleName().isEmpty() ? value.getClass().getName() : value.getClass().getSimpleName();
        return ("AEIOUaeiou".indexOf(name.charAt(0)) >= 0 ? "an " : "a ") + name;
    }

    /**
     * A buffer, through the device access the manager opened for the launch: {@code handle} is the backend's own
     * ({@link ComputeBackend#openDeviceHandle}) for exactly the buffer's bytes; {@code hostSegment} those bytes as
     * the launching thread may use them, given to Java kernels where the host addresses the memory (null otherwise);
     * {@code description} the buffer, for messages.
     */
    record Buffer(DeviceHandle handle, @Nullable MemorySegment hostSegment, long byteSize, DataType type, AccessMode mode,
                  String description) implements KernelArgument {
        public Buffer {
            Objects.requireNonNull(handle, "handle");
            Objects.requireNonNull(type, "type");
            Objects.requireNonNull(mode, "mode");
            Objects.requireNonNull(description, "description");
        }
    }

    /** A scalar passed by value: an {@code Integer} (a C {@code int}), {@code Long} (64 bits), {@code Float} or {@code Double}. */
    record Scalar(Object value) implements KernelArgument {
        public Scalar {
            if (!(value instanceof Integer || value instanceof Long || value instanceof Float || value instanceof Double)) {
                throw new IllegalArgumentException("a scalar kernel argument is an Integer, Long, Float or Double, not "
                        + (value == null ? "null" : value.getClass().getName()));
            }
        }
    }
}
