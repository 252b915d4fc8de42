package dev.compute.memory;

import dev.compute.memory.internal.UserCode;
import dev.compute.memory.spi.CallerFutures;
import dev.compute.memory.spi.DeviceHandle;
import dev.compute.memory.spi.KernelArgument;
import dev.compute.memory.spi.NativeKernel;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * A {@link ComputeKernel} of a manager: checks the arguments (the backend's kernel checks them against its parameters),
 * then takes a device access per buffer on the calling thread
 * (which syncs, orders and holds the buffer by the lifetime rule), has the backend queue the kernel where those
 * accesses order work, records the kernel as in flight on each buffer and ends the accesses.
 */
final class BackendKernel implements ComputeKernel {

    private final PooledMemoryManager manager;
    private final KernelSource source;
    private final NativeKernel kernel;

    BackendKernel(PooledMemoryManager manager, KernelSource source, NativeKernel kernel) {
        this.manager = manager;
        this.source = source;
        this.kernel = kernel;
    }

    @Override
    public String name() {
        return source.name();
    }

    @Override
    public KernelSource source() {
        return source;
    }

    @Override
    public CompletableFuture<Void> launch(LaunchShape shape, Object... passed) {
        Objects.requireNonNull(shape, "shape");
        // the caller's array may change while the launch waits for a buffer's work: it passes what was checked
        Object[] arguments = Objects.requireNonNull(passed, "arguments").clone();
        if (manager.isClosed()) {
            throw closedManager();
        }
        KernelArg[] buffers = checked(arguments);
        kernel.check(shape, asChecked(arguments, buffers));
        // a call of the manager from the first access to the last one's end: a close meanwhile (another thread's, or the
        // Java kernel's own) frees no memory and releases no queue or program that the launch still uses
        return manager.call(this::closedManager, () -> launch(shape, arguments, buffers));
    }

    private IllegalStateException closedManager() {
        return new IllegalStateException(this + " cannot launch: its UnifiedMemoryManager is closed");
    }

    private CompletableFuture<Void> launch(LaunchShape shape, Object[] arguments, @Nullable KernelArg[] buffers) {
        boolean java = source.language() == KernelSource.Language.JAVA;
        List<KernelArgument> bound = new ArrayList<>(arguments.length);
        List<BufferAccess> accesses = new ArrayList<>();
        Throwable failure = null;
        try {
            for (int i = 0; i < arguments.length; i++) {
                KernelArg buffer = buffers[i];
                if (buffer == null) {
                    bound.add(new KernelArgument.Scalar(arguments[i]));
                    continue;
                }
                BufferAccess access = open(i, buffer);
                accesses.add(access);
                UnifiedBuffer b = buffer.buffer();
                MemorySegment host = java && b.isHostAccessible() ? access.segment() : null;
                bound.add(new KernelArgument.Buffer(access.handle(DeviceHandle.class), host, b.byteSize(), b.dataType(), buffer.mode(),
                        b.toString()));
            }
            CompletableFuture<Void> done = java ? runJava(shape, bound) : kernel.launch(shape, bound);
            for (BufferAccess access : accesses) {
                access.inFlightUntil(done);
            }
            return CallerFutures.forCaller(done);
        } catch (RuntimeException | Error e) {
            failure = e;
            throw e;
        } finally {
            endAll(accesses, failure);
        }
    }

    /**
     * A Java kernel's body is the application's code, run inside this launch's call: a close it makes itself cannot wait
     * for that call, so it finishes once the launch is over.
     */
    private CompletableFuture<Void> runJava(LaunchShape shape, List<KernelArgument> bound) {
        UserCode.enter();
        try {
            return kernel.launch(shape, bound);
        } finally {
            UserCode.exit();
        }
    }

    /** The buffer arguments (null where a scalar is), every argument checked before any access is taken. */
    private @Nullable KernelArg[] checked(Object[] arguments) {
        KernelArg[] buffers = new KernelArg[arguments.length];
        for (int i = 0; i < arguments.length; i++) {
            Object argument = arguments[i];
            KernelArg buffer = switch (argument) {
                case null -> throw new IllegalArgumentException(argument(i) + " is null; pass a UnifiedBuffer, a KernelArg, or an "
                        + "Integer, Long, Float or Double");
                case UnifiedBuffer plain -> KernelArg.readWrite(plain);
                case KernelArg arg -> arg;
                case Integer ignored -> null;
                case Long ignored -> null;
                case Float ignored -> null;
                case Double ignored -> null;
                default -> throw new IllegalArgumentException(argument(i) + " is a " + argument.getClass().getName() + ", which no kernel"
                        + " takes: pass a UnifiedBuffer (or a slice), a KernelArg, or an Integer (int), Long (64-bit long), Float or Double"
                        + (argument instanceof Short || argument instanceof Byte ? " (widen it to an Integer)" : ""));
            };
            if (buffer != null && !buffer.buffer().belongsTo(manager)) {
                throw new IllegalArgumentException(argument(i) + " is a buffer of another UnifiedMemoryManager (" + buffer.buffer()
                        + "); a kernel runs on the buffers of the manager that compiled it");
            }
            if (buffer != null && buffer.buffer().isClosed()) {
                // here, not only when its access opens: by then an earlier argument's access has synced and marked it
                throw new IllegalStateException(argument(i) + " (" + buffer.buffer() + "): the buffer is closed");
            }
            if (buffer != null && buffer.mode().writes()) {
                buffer.buffer().core().requireWritable(argument(i), "; pass it as KernelArg.read(buffer) for a kernel that reads it");
            }
            buffers[i] = buffer;
        }
        return buffers;
    }

    /** The arguments as {@link NativeKernel#check} takes them: each buffer as its {@link KernelArg}, each scalar as it is. */
    private static List<Object> asChecked(Object[] arguments, @Nullable KernelArg[] buffers) {
        List<Object> checked = new ArrayList<>(arguments.length);
        for (int i = 0; i < arguments.length; i++) {
            checked.add(buffers[i] != null ? buffers[i] : arguments[i]);
        }
        return checked;
    }

    /** The device access of argument {@code index}, a failure to take it said with the kernel and the argument. */
    private BufferAccess open(int index, KernelArg argument) {
        try {
            BufferAccess access = argument.buffer().deviceAccess(argument.mode());
            // a close overtook the access's call, whose end took this thread's accesses with it
            if (!access.isOpen() && manager.isClosed()) {
                throw new IllegalStateException(argument.buffer().core().closedByManager());
            }
            return access;
        } catch (IllegalStateException e) {
            throw new IllegalStateException(argument(index) + " (" + argument.buffer() + "): " + e.getMessage(), e);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(argument(index) + " (" + argument.buffer() + "): " + e.getMessage(), e);
        } catch (UnsupportedOperationException e) {
            throw new UnsupportedOperationException(argument(index) + " (" + argument.buffer() + "): " + e.getMessage(), e);
        }
    }

    /** Ends the accesses, last first: each records the kernel as in flight; a failure to end one joins {@code failure}. */
    private static void endAll(List<BufferAccess> accesses, @Nullable Throwable failure) {
        RuntimeException ending = null;
        for (int i = accesses.size() - 1; i >= 0; i--) {
            try {
                accesses.get(i).close();
            } catch (RuntimeException e) {
                if (failure != null) {
                    failure.addSuppressed(e);
                } else if (ending == null) {
                    ending = e;
                } else {
                    ending.addSuppressed(e);
                }
            }
        }
        if (ending != null) {
            throw ending;
        }
    }

    private String argument(int index) {
        return this + ", argument " + index;
    }

    @Override
    public String toString() {
        return "kernel '" + source.name() + "'";
    }
}
