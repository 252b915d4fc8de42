package dev.compute.memory.opencl;

import static org.jocl.CL.CL_BUILD_PROGRAM_FAILURE;
import static org.jocl.CL.CL_DEVICE_LOCAL_MEM_SIZE;
import static org.jocl.CL.CL_INVALID_BUILD_OPTIONS;
import static org.jocl.CL.CL_INVALID_KERNEL_NAME;
import static org.jocl.CL.CL_KERNEL_ARG_ACCESS_NONE;
import static org.jocl.CL.CL_KERNEL_ARG_ACCESS_QUALIFIER;
import static org.jocl.CL.CL_KERNEL_ARG_ADDRESS_CONSTANT;
import static org.jocl.CL.CL_KERNEL_ARG_ADDRESS_GLOBAL;
import static org.jocl.CL.CL_KERNEL_ARG_ADDRESS_LOCAL;
import static org.jocl.CL.CL_KERNEL_ARG_ADDRESS_QUALIFIER;
import static org.jocl.CL.CL_KERNEL_ARG_NAME;
import static org.jocl.CL.CL_KERNEL_ARG_TYPE_NAME;
import static org.jocl.CL.CL_KERNEL_COMPILE_WORK_GROUP_SIZE;
import static org.jocl.CL.CL_KERNEL_LOCAL_MEM_SIZE;
import static org.jocl.CL.CL_KERNEL_NUM_ARGS;
import static org.jocl.CL.CL_KERNEL_WORK_GROUP_SIZE;
import static org.jocl.CL.CL_MEM_READ_WRITE;
import static org.jocl.CL.CL_PROGRAM_BUILD_LOG;
import static org.jocl.CL.CL_PROGRAM_KERNEL_NAMES;
import static org.jocl.CL.CL_SUCCESS;

import dev.compute.memory.DataType;
import dev.compute.memory.KernelArg;
import dev.compute.memory.KernelCompileException;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.KernelArgument;
import dev.compute.memory.spi.NativeKernel;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_device_id;
import org.jocl.cl_event;
import org.jocl.cl_kernel;
import org.jocl.cl_mem;
import org.jocl.cl_program;
import org.jspecify.annotations.Nullable;

/**
 * One's own OpenCL C kernel ({@link KernelSource.Language#OPENCL_C}), built once on the backend's context and
 * device and launched on its in-order queue, where the launch's device accesses order their work.
 *
 * <p><b>Threads.</b> A {@code cl_kernel} holds its arguments, and {@code clSetKernelArg} on one kernel from two
 * threads races; a launch therefore takes a {@code cl_kernel} of its own from a pool (made with
 * {@code clCreateKernel} when none is idle), sets the arguments, enqueues and gives it back: the enqueue has taken
 * the arguments, so the next launch may set new ones at once. The pool grows to the most launches under way at once.
 *
 * <p><b>Arguments, checked.</b> The program is built with {@code -cl-kernel-arg-info}, so each launch is checked
 * against the kernel's parameters ({@link #check}, before the manager opens any access for it): their number
 * ({@code CL_KERNEL_NUM_ARGS}), a buffer for each {@code __global} or {@code __constant} pointer (of the pointer's
 * element type, for typed buffers), and the scalar type of each other one ({@code int}/{@code uint} an Integer,
 * {@code long}/{@code ulong} a Long, {@code float}, {@code double}); the work-group against the kernel's limit, and the
 * work-groups of the launch against 2^32-1 in all.
 * A kernel reused with stale arguments, the failure mode of a wrong count, cannot happen.
 *
 * <p><b>Buffers.</b> The access's {@link OpenClDeviceHandle} gives the {@code cl_mem}: a sub-buffer over exactly the
 * bytes for DEVICE memory at an aligned offset (every buffer, and slices at multiples of
 * {@code CL_DEVICE_MEM_BASE_ADDR_ALIGN}), a buffer over the host memory for PINNED, the SVM pointer for UNIFIED. A
 * DEVICE slice at any other offset has no sub-buffer; the kernel would need an offset argument to find its bytes in
 * the pool's buffer. Instead the launch copies the slice into a temporary buffer of its size on the queue, runs the
 * kernel on it and, for a writing argument, copies it back after the kernel: the kernel sees the slice at index 0
 * as everywhere else, at the cost of a device copy of the slice in (and out). Allocate a buffer of its own where
 * that matters.
 */
final class OpenClKernel implements NativeKernel {

    /**
     * A parameter as {@code clGetKernelArgInfo} describes it. {@code imageOrPipe}: an image or a pipe (it has an access
     * qualifier), which is {@code __global} too but no buffer: PoCL takes a buffer's {@code cl_mem} for it and ends the
     * process in the enqueue. {@code types}: the scalar or element type it may be, several where the source declares its
     * typedef as several and the preprocessor chose one ({@link #typedefs}).
     */
    private record Parameter(String name, String typeName, List<String> types, int addressQualifier, boolean imageOrPipe) {
        boolean isBuffer() {
            return !imageOrPipe && (addressQualifier == CL_KERNEL_ARG_ADDRESS_GLOBAL || addressQualifier == CL_KERNEL_ARG_ADDRESS_CONSTANT);
        }

        String describe(int index) {
            return "parameter " + index + (name.isEmpty() ? "" : " '" + name + "'") + " is "
                    + (addressQualifier == CL_KERNEL_ARG_ADDRESS_LOCAL ? "__local " : isBuffer() ? "__global " : "") + typeName
                    + (types.size() > 1 ? " (declared as " + String.join(" and ", types) + ", of which the build took one)" : "");
        }
    }

    /** A DEVICE slice at an unaligned offset, staged through a temporary buffer for the launch. */
    private record Staged(cl_mem temporary, OpenClDeviceHandle slice, boolean writes) {
        /** Whether {@code other} is the same bytes, passed again: it shares this temporary, as it would share the memory. */
        boolean sameBytes(OpenClDeviceHandle other) {
            return slice.memory().equals(other.memory()) && slice.offset() == other.offset() && slice.byteSize() == other.byteSize();
        }
    }

    /** A simple scalar {@code typedef} of the source ({@code typedef double real;}): the argument info names the typedef, not its type. */
    private static final Pattern TYPEDEF = Pattern.compile(
            "typedef\\s+(?:const\\s+)?((?:unsigned\\s+)?\\w+)\\s+(\\w+)\\s*;");
    /** OpenCL C's comments, C's two kinds: a typedef in one declares nothing. */
    private static final Pattern COMMENT = Pattern.compile("//[^\\n]*|/\\*.*?\\*/", Pattern.DOTALL);
    /** The element types of typed pointers, by the buffers' types they take. */
    private static final Map<String, DataType> POINTER_TYPES = Map.of("char", DataType.INT8, "uchar", DataType.INT8,
            "short", DataType.INT16, "ushort", DataType.INT16, "int", DataType.INT32, "uint", DataType.INT32,
            "long", DataType.INT64, "ulong", DataType.INT64, "float", DataType.FLOAT32, "double", DataType.FLOAT64);

    /** The most work-groups one launch may have, all dimensions together: what 32 bits count. */
    private static final long MAX_WORK_GROUPS = 0xFFFF_FFFFL;

    private final OpenClBackend backend;
    private final String name;
    private final cl_program program;
    private final int parameterCount;
    /** Null where the implementation keeps no argument info: only the count is checked then. */
    private final @Nullable List<Parameter> parameters;
    private final long maxWorkGroup;
    /**
     * The work-group the kernel declares with {@code reqd_work_group_size}, in three dimensions; null where it declares
     * none. Any other work-group fails the enqueue (after the accesses synced and marked their buffers), so a shape
     * that leaves the group to the backend gets this one.
     */
    private final long @Nullable [] requiredWorkGroup;
    /** The device's most work items in each dimension of a work-group; null where it cannot say. */
    private final long @Nullable [] maxWorkItems;
    /** Kernel objects not in a launch now; guarded by itself. */
    private final ArrayDeque<cl_kernel> idle = new ArrayDeque<>();
    private int created;
    private boolean released;

    private OpenClKernel(OpenClBackend backend, String name, cl_program program, cl_kernel first, Map<String, Set<String>> typedefs) {
        this.backend = backend;
        this.name = name;
        this.program = program;
        this.parameterCount = (int) kernelInt(first, CL_KERNEL_NUM_ARGS);
        this.parameters = parameters(first, parameterCount, typedefs);
        long[] workGroup = new long[1];
        OpenClCalls.check(JoclCalls.clGetKernelWorkGroupInfo(first, backend.deviceId(), CL_KERNEL_WORK_GROUP_SIZE, Sizeof.size_t,
                Pointer.to(workGroup), null), "clGetKernelWorkGroupInfo of kernel '" + name + "'");
        this.maxWorkGroup = Math.max(1, workGroup[0]);
        long[] required = new long[3];
        int asked = JoclCalls.clGetKernelWorkGroupInfo(first, backend.deviceId(), CL_KERNEL_COMPILE_WORK_GROUP_SIZE, 3L * Sizeof.size_t,
                Pointer.to(required), null);
        // (0, 0, 0) where the kernel declares none; an implementation that cannot say leaves the enqueue to refuse a wrong one
        this.requiredWorkGroup = asked != CL_SUCCESS || required[0] == 0 ? null : required;
        this.maxWorkItems = OpenClCalls.maxWorkItemSizes(backend.deviceId());
        this.idle.add(first);
        this.created = 1;
    }

    /** Builds {@code source} on the backend's device; a failed build throws with its log. */
    static OpenClKernel build(OpenClBackend backend, KernelSource source) {
        int[] error = new int[1];
        cl_program program = JoclCalls.clCreateProgramWithSource(backend.context(), 1, new String[] {source.text()}, null, error);
        OpenClCalls.check(error[0], "clCreateProgramWithSource of kernel '" + source.name() + "'");
        try {
            cl_device_id device = backend.deviceId();
            String options = (source.buildOptions() + " -cl-kernel-arg-info").trim();
            int built = JoclCalls.clBuildProgram(program, 1, new cl_device_id[] {device}, options, null, null);
            if (built == CL_INVALID_BUILD_OPTIONS) {
                built = JoclCalls.clBuildProgram(program, 1, new cl_device_id[] {device}, source.buildOptions(), null, null);
            }
            if (built != CL_SUCCESS) {
                throw new KernelCompileException("building " + source + " on OpenCL device " + backend.device().describe()
                        + " failed: " + CL.stringFor_errorCode(built) + (built == CL_BUILD_PROGRAM_FAILURE ? "; the build log:" : ""),
                        buildLog(program, device));
            }
            cl_kernel first = JoclCalls.clCreateKernel(program, source.name(), error);
            if (error[0] == CL_INVALID_KERNEL_NAME) {
                throw new KernelCompileException("the program of " + source + " has no __kernel named '" + source.name()
                        + "'; it defines: " + programString(program, CL_PROGRAM_KERNEL_NAMES).replace(';', ' '), "");
            }
            OpenClCalls.check(error[0], "clCreateKernel '" + source.name() + "'");
            // a kernel refused here is not released: PoCL 3.1 ends the process in clReleaseKernel of a kernel whose
            // __local arrays its device cannot hold (aKernelUsingMoreLocalMemoryThanTheDeviceHasFailsToCompile); a
            // refused compile keeps one kernel object and its program, the lesser harm
            refuseMoreLocalMemoryThanTheDeviceHas(backend, source, first);
            return new OpenClKernel(backend, source.name(), program, first, typedefs(source.text()));
        } catch (RuntimeException e) {
            JoclCalls.clReleaseProgram(program);
            throw e;
        }
    }

    /**
     * A kernel whose {@code __local} arrays the device's local memory cannot hold never runs there: OpenCL fails its
     * enqueue (after the accesses synced and marked their buffers), and PoCL built it and ended the process at the launch.
     */
    private static void refuseMoreLocalMemoryThanTheDeviceHas(OpenClBackend backend, KernelSource source, cl_kernel kernel) {
        long[] used = new long[1];
        if (JoclCalls.clGetKernelWorkGroupInfo(kernel, backend.deviceId(), CL_KERNEL_LOCAL_MEM_SIZE, Sizeof.cl_ulong, Pointer.to(used), null)
                != CL_SUCCESS) {
            return; // an implementation that cannot say leaves the enqueue to refuse it
        }
        long available = OpenClCalls.deviceLong(backend.deviceId(), CL_DEVICE_LOCAL_MEM_SIZE);
        if (used[0] > available) {
            JoclCalls.clReleaseKernel(kernel);
            throw new KernelCompileException(source + " uses " + used[0] + " bytes of __local memory, more than the " + available
                    + " bytes of local memory of OpenCL device " + backend.device().describe() + " (CL_DEVICE_LOCAL_MEM_SIZE): it cannot"
                    + " run there; declare smaller __local arrays", "");
        }
    }

    @Override
    public String name() {
        return name;
    }

    /** A call the close waits for ({@link OpenClQueue#asCall}): it would release the kernel and queue under the launch. */
    @Override
    public CompletableFuture<Void> launch(LaunchShape shape, List<KernelArgument> arguments) {
        return backend.queue().asCall(() -> launchCall(shape, arguments));
    }

    private CompletableFuture<Void> launchCall(LaunchShape shape, List<KernelArgument> arguments) {
        long[] group = workGroup(shape);
        long[] global = shape.roundedUpTo(group); // checked before the accesses opened
        cl_kernel kernel = take();
        List<Staged> staged = new ArrayList<>();
        try {
            for (int i = 0; i < arguments.size(); i++) {
                switch (arguments.get(i)) {
                    case KernelArgument.Buffer buffer -> setBuffer(kernel, i, buffer, staged);
                    case KernelArgument.Scalar(Object value) -> setScalar(kernel, i, value);
                }
            }
            cl_event done = new cl_event();
            int code = JoclCalls.clEnqueueNDRangeKernel(backend.commandQueue(), kernel, shape.dimensions(), null, global, group, 0, null, done);
            if (code != CL_SUCCESS) {
                throw OpenClCalls.failure(code, "clEnqueueNDRangeKernel of kernel '" + name + "' over " + shape + " (work-groups of "
                        + Arrays.toString(group) + ", at most " + maxWorkGroup + " work items for this kernel on "
                        + backend.device().describe() + ")");
            }
            if (staged.isEmpty()) {
                return backend.queue().position(done);
            }
            JoclCalls.clReleaseEvent(done);
            for (Staged slice : staged) {
                if (slice.writes()) {
                    OpenClCalls.check(JoclCalls.clEnqueueCopyBuffer(backend.commandQueue(), slice.temporary(), slice.slice().memory(), 0,
                            slice.slice().offset(), slice.slice().byteSize(), 0, null, null), "clEnqueueCopyBuffer of kernel '" + name
                            + "''s results back into an unaligned slice");
                }
            }
            return backend.queue().position();
        } finally {
            give(kernel);
            for (Staged slice : staged) {
                JoclCalls.clReleaseMemObject(slice.temporary()); // OpenCL keeps it until the commands using it have finished
            }
        }
    }

    private void setBuffer(cl_kernel kernel, int index, KernelArgument.Buffer buffer, List<Staged> staged) {
        OpenClDeviceHandle handle = (OpenClDeviceHandle) buffer.handle();
        if (handle.location() == MemoryLocation.UNIFIED) {
            OpenClCalls.check(JoclCalls.clSetKernelArgSVMPointer(kernel, index, handle.svmPointer()), "clSetKernelArgSVMPointer " + index
                    + " of kernel '" + name + "'");
            return;
        }
        cl_mem memory = handle.memory();
        if (handle.offset() != 0) {
            memory = stage(handle, buffer, staged);
        }
        OpenClCalls.check(JoclCalls.clSetKernelArg(kernel, index, Sizeof.cl_mem, Pointer.to(memory)), "clSetKernelArg " + index + " of kernel '"
                + name + "'");
    }

    /**
     * A temporary buffer holding the slice's bytes, copied in on the queue before the kernel. The same slice passed
     * again (an in-place kernel's output and input) gets the same temporary, copied back once if either argument writes:
     * a temporary each would copy the unchanged one back over the other's results.
     */
    private cl_mem stage(OpenClDeviceHandle slice, KernelArgument.Buffer buffer, List<Staged> staged) {
        for (int i = 0; i < staged.size(); i++) {
            Staged earlier = staged.get(i);
            if (earlier.sameBytes(slice)) {
                if (buffer.mode().writes() && !earlier.writes()) {
                    staged.set(i, new Staged(earlier.temporary(), earlier.slice(), true));
                }
                return earlier.temporary();
            }
        }
        int[] error = new int[1];
        cl_mem temporary = JoclCalls.clCreateBuffer(backend.context(), CL_MEM_READ_WRITE, slice.byteSize(), null, error);
        OpenClCalls.check(error[0], "clCreateBuffer of " + slice.byteSize() + " bytes to stage an unaligned slice for kernel '" + name + "'");
        staged.add(new Staged(temporary, slice, buffer.mode().writes()));
        OpenClCalls.check(JoclCalls.clEnqueueCopyBuffer(backend.commandQueue(), slice.memory(), temporary, slice.offset(), 0, slice.byteSize(),
                0, null, null), "clEnqueueCopyBuffer of an unaligned slice for kernel '" + name + "'");
        return temporary;
    }

    private void setScalar(cl_kernel kernel, int index, Object value) {
        int code = switch (value) {
            case Integer i -> JoclCalls.clSetKernelArg(kernel, index, Sizeof.cl_int, Pointer.to(new int[] {i}));
            case Long l -> JoclCalls.clSetKernelArg(kernel, index, Sizeof.cl_long, Pointer.to(new long[] {l}));
            case Float f -> JoclCalls.clSetKernelArg(kernel, index, Sizeof.cl_float, Pointer.to(new float[] {f}));
            case Double d -> JoclCalls.clSetKernelArg(kernel, index, Sizeof.cl_double, Pointer.to(new double[] {d}));
            default -> throw new IllegalArgumentException("kernel '" + name + "', argument " + index + ": no scalar type " + value.getClass());
        };
        if (code != CL_SUCCESS) {
            throw new IllegalArgumentException("kernel '" + name + "', argument " + index + " (a " + value.getClass().getSimpleName()
                    + "): clSetKernelArg failed with " + CL.stringFor_errorCode(code) + "; the kernel's parameter " + index
                    + " is of another size");
        }
    }

    // ---- checking a launch's arguments --------------------------------------------------------------------------

    /** Checked before the manager opens any access, so a refused launch syncs, waits for and marks nothing. */
    @Override
    public void check(LaunchShape shape, List<Object> arguments) {
        long[] group = workGroup(shape);
        long[] required = requiredWorkGroup;
        if (required != null && !isRequired(group, required)) { // the enqueue would refuse it, after the accesses synced and marked
            throw new IllegalArgumentException("kernel '" + name + "' over " + shape + ": " + (shape.hasWorkGroup()
                    ? "a work-group of " + Arrays.toString(group) + " where the kernel requires " + Arrays.toString(required)
                            + " (reqd_work_group_size); give that work-group, or none"
                    : "the kernel requires a work-group of " + Arrays.toString(required) + " (reqd_work_group_size), which a "
                            + shape.dimensions() + "-dimensional shape cannot have; launch it over a shape of as many dimensions"));
        }
        String beyond = beyondDevice(group, maxWorkItems);
        if (beyond != null) { // the enqueue would refuse it (CL_INVALID_WORK_ITEM_SIZE), after the accesses synced and marked
            throw new IllegalArgumentException("kernel '" + name + "' over " + shape + ": " + beyond + " on " + backend.device().describe());
        }
        long items = 1;
        for (long size : group) {
            items = size > maxWorkGroup / items ? Long.MAX_VALUE : items * size; // saturates: a group of 2^32 x 2^32 is too many
        }
        if (items > maxWorkGroup) { // the enqueue would refuse it, after the accesses synced and marked their buffers
            throw new IllegalArgumentException("kernel '" + name + "' over " + shape + ": a work-group of "
                    + Arrays.toString(group) + " work items is more than the " + maxWorkGroup
                    + " this kernel can run per work-group on " + backend.device().describe());
        }
        long[] global = shape.roundedUpTo(group);
        long[] groups = new long[global.length];
        long allGroups = 1;
        for (int d = 0; d < global.length; d++) {
            groups[d] = global[d] / group[d];
            allGroups = groups[d] > MAX_WORK_GROUPS / allGroups ? Long.MAX_VALUE : allGroups * groups[d]; // saturates as above
        }
        if (allGroups > MAX_WORK_GROUPS) { // PoCL's CPU device counts them in 32 bits and ends the process beyond (SIGILL, an assertion)
            throw new IllegalArgumentException("kernel '" + name + "' over " + shape + " needs " + Arrays.toString(groups)
                    + " work-groups of " + Arrays.toString(group) + ", more than the 2^32-1 a launch may have in all (PoCL counts them in"
                    + " 32 bits and ends the process beyond): launch larger work-groups (withWorkGroup) or loop inside the kernel");
        }
        if (arguments.size() != parameterCount) {
            throw new IllegalArgumentException("kernel '" + name + "' takes " + parameterCount + " argument(s); the launch passed "
                    + arguments.size());
        }
        for (int i = 0; i < parameterCount; i++) {
            if (arguments.get(i) instanceof KernelArg buffer && buffer.buffer().location() == MemoryLocation.HOST) {
                throw new IllegalArgumentException("kernel '" + name + "', argument " + i + " (" + buffer.buffer() + "): "
                        + OpenClDeviceHandle.HOST_REFUSED);
            }
        }
        if (parameters == null) {
            return;
        }
        for (int i = 0; i < parameterCount; i++) {
            Parameter parameter = parameters.get(i);
            String mismatch = parameter.imageOrPipe() ? "images and pipes are not taken: pass such a kernel its image through a device access of"
                    + " your own (clSetKernelArg)"
                    : arguments.get(i) instanceof KernelArg buffer
                    ? bufferMismatch(parameter, buffer.buffer().dataType())
                    : scalarMismatch(parameter, arguments.get(i));
            if (mismatch != null) {
                throw new IllegalArgumentException("kernel '" + name + "', argument " + i + " (" + describe(arguments.get(i)) + "): the kernel's "
                        + parameter.describe(i) + "; " + mismatch);
            }
        }
    }

    /**
     * Which dimension of {@code group} has more work items than the device allows there ({@code perDimension}, from
     * {@code CL_DEVICE_MAX_WORK_ITEM_SIZES}: a GPU's 1024 x 1024 x 64, where a 1 x 1 x 128 group is within the total), said
     * in words; null where none has, or the device cannot say.
     */
    static @Nullable String beyondDevice(long[] group, long @Nullable [] perDimension) {
        if (perDimension == null) {
            return null;
        }
        for (int d = 0; d < group.length && d < perDimension.length; d++) {
            if (group[d] > perDimension[d]) {
                return "a work-group of " + Arrays.toString(group) + " has " + group[d] + " work items in dimension " + d
                        + ", more than the device's " + perDimension[d] + " there (CL_DEVICE_MAX_WORK_ITEM_SIZES "
                        + Arrays.toString(perDimension) + ")";
            }
        }
        return null;
    }

    /** The shape's work-group, or where it leaves the group to the backend, the kernel's required one or the default. */
    private long[] workGroup(LaunchShape shape) {
        long[] required = requiredWorkGroup;
        if (required == null || shape.hasWorkGroup()) {
            return shape.workGroupOrDefault(maxWorkGroup);
        }
        return Arrays.copyOf(required, shape.dimensions());
    }

    /** Whether {@code group} is {@code required}, the dimensions it leaves out being 1 there. */
    private static boolean isRequired(long[] group, long[] required) {
        for (int d = 0; d < required.length; d++) {
            if ((d < group.length ? group[d] : 1) != required[d]) {
                return false;
            }
        }
        return true;
    }

    private static @Nullable String bufferMismatch(Parameter parameter, DataType type) {
        if (parameter.addressQualifier() == CL_KERNEL_ARG_ADDRESS_LOCAL) {
            return "__local parameters are not taken: declare the local array inside the kernel, of a fixed size";
        }
        if (!parameter.isBuffer()) {
            return "pass " + scalarFor(parameter.types());
        }
        List<DataType> expected = new ArrayList<>();
        for (String element : parameter.types()) {
            DataType elementType = POINTER_TYPES.get(element.replace("const", "").trim());
            if (elementType == null) {
                return null; // a struct, a vector: any buffer
            }
            expected.add(elementType);
        }
        if (type != DataType.INT8 && !expected.contains(type)) {
            return "pass a " + expected.stream().distinct().map(DataType::toString).collect(Collectors.joining(" or a ")) + " buffer (this one is "
                    + type + "), or one allocated by bytes";
        }
        return null;
    }

    private static @Nullable String scalarMismatch(Parameter parameter, Object value) {
        if (parameter.isBuffer() || parameter.addressQualifier() == CL_KERNEL_ARG_ADDRESS_LOCAL) {
            return parameter.isBuffer() ? "pass a UnifiedBuffer or a KernelArg" : "__local parameters are not taken";
        }
        for (String type : parameter.types()) {
            boolean fits = switch (value) {
                case Integer ignored -> type.equals("int") || type.equals("uint");
                case Long ignored -> type.equals("long") || type.equals("ulong");
                case Float ignored -> type.equals("float");
                case Double ignored -> type.equals("double");
                default -> false;
            };
            if (fits) {
                return null;
            }
        }
        return "pass " + scalarFor(parameter.types());
    }

    private static String scalarFor(List<String> types) {
        return types.stream().map(OpenClKernel::scalarFor).distinct().collect(Collectors.joining(" or "));
    }

    private static String scalarFor(String type) {
        return switch (type.trim()) {
            case "int", "uint" -> "an Integer";
            case "long", "ulong" -> "a Long";
            case "float" -> "a Float";
            case "double" -> "a Double";
            default -> "a value of a type no Java argument is passed as (" + type.trim() + "); change the parameter to int, long, float, "
                    + "double or a __global pointer";
        };
    }

    private static String describe(Object argument) {
        return argument instanceof KernelArg buffer ? "a buffer, " + buffer.buffer()
                : KernelArgument.typeOf(argument) + " " + argument;
    }

    // ---- the pool of kernel objects ------------------------------------------------------------------------------

    private cl_kernel take() {
        synchronized (idle) {
            if (released) {
                throw new IllegalStateException("kernel '" + name + "' was released: its OpenCL backend is closed");
            }
            cl_kernel kernel = idle.poll();
            if (kernel != null) {
                return kernel;
            }
            created++;
        }
        int[] error = new int[1];
        cl_kernel kernel = JoclCalls.clCreateKernel(program, name, error);
        if (error[0] != CL_SUCCESS) {
            synchronized (idle) {
                created--; // none was made
            }
        }
        OpenClCalls.check(error[0], "clCreateKernel '" + name + "' for a launch on another thread");
        return kernel;
    }

    private void give(cl_kernel kernel) {
        synchronized (idle) {
            if (!released) {
                idle.push(kernel);
                return;
            }
        }
        JoclCalls.clReleaseKernel(kernel);
    }

    /** The kernel objects made so far: the most launches that were under way at once (for the tests). */
    int kernelObjects() {
        synchronized (idle) {
            return created;
        }
    }

    /** Releases the idle kernel objects and the program; kernels in a launch now are released as they come back. */
    void release() {
        List<cl_kernel> toRelease;
        synchronized (idle) {
            if (released) {
                return;
            }
            released = true;
            toRelease = new ArrayList<>(idle);
            idle.clear();
        }
        toRelease.forEach(JoclCalls::clReleaseKernel);
        JoclCalls.clReleaseProgram(program); // OpenCL deletes it once its last kernel object is gone
    }

    // ---- info queries ------------------------------------------------------------------------------------------

    private static long kernelInt(cl_kernel kernel, int param) {
        ByteBuffer value = ByteBuffer.allocate(8).order(ByteOrder.nativeOrder());
        long[] size = new long[1];
        OpenClCalls.check(JoclCalls.clGetKernelInfo(kernel, param, 8, Pointer.to(value.array()), size), "clGetKernelInfo");
        return size[0] == 4 ? Integer.toUnsignedLong(value.getInt(0)) : value.getLong(0);
    }

    /** Each parameter's name, type and address space; null where the implementation keeps no argument info. */
    private static @Nullable List<Parameter> parameters(cl_kernel kernel, int count, Map<String, Set<String>> typedefs) {
        List<Parameter> parameters = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int[] qualifier = new int[1];
            if (JoclCalls.clGetKernelArgInfo(kernel, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, Sizeof.cl_uint, Pointer.to(qualifier), null) != CL_SUCCESS) {
                return null;
            }
            String type = argString(kernel, i, CL_KERNEL_ARG_TYPE_NAME);
            String parameterName = argString(kernel, i, CL_KERNEL_ARG_NAME);
            if (type == null) {
                return null;
            }
            int[] access = {CL_KERNEL_ARG_ACCESS_NONE};
            JoclCalls.clGetKernelArgInfo(kernel, i, CL_KERNEL_ARG_ACCESS_QUALIFIER, Sizeof.cl_uint, Pointer.to(access), null); // NONE where unknown
            String bare = type.trim();
            String stars = "";
            while (bare.endsWith("*")) {
                stars += "*";
                bare = bare.substring(0, bare.length() - 1).trim();
            }
            List<String> types = resolved(bare, typedefs, 0);
            parameters.add(new Parameter(parameterName == null ? "" : parameterName, (types.size() == 1 ? types.getFirst() : bare) + stars, types,
                    qualifier[0], access[0] != CL_KERNEL_ARG_ACCESS_NONE));
        }
        return List.copyOf(parameters);
    }

    /**
     * The source's simple typedefs, name to each type the text declares it as, unsigned C spellings as OpenCL's short
     * names. Several where the preprocessor chooses one ({@code #ifdef USE_DOUBLE typedef double real; #else typedef
     * float real; #endif}, the precision a build option sets): the text alone cannot say which the build took, so a
     * launch may pass any of them.
     */
    static Map<String, Set<String>> typedefs(String source) {
        Map<String, Set<String>> typedefs = new HashMap<>();
        Matcher matcher = TYPEDEF.matcher(COMMENT.matcher(source).replaceAll(" "));
        while (matcher.find()) {
            String type = matcher.group(1).replaceAll("^unsigned\\s+(char|short|int|long)$", "u$1");
            typedefs.computeIfAbsent(matcher.group(2), declared -> new LinkedHashSet<>()).add(type);
        }
        return typedefs;
    }

    /** The types {@code bare} (no pointer) may be, through the source's typedefs; an unknown name as it is. */
    private static List<String> resolved(String bare, Map<String, Set<String>> typedefs, int depth) {
        Set<String> declared = typedefs.get(bare);
        if (declared == null || depth == 8) {
            return List.of(bare);
        }
        return declared.stream().flatMap(type -> resolved(type, typedefs, depth + 1).stream()).distinct().toList();
    }

    private static @Nullable String argString(cl_kernel kernel, int index, int param) {
        long[] size = new long[1];
        if (JoclCalls.clGetKernelArgInfo(kernel, index, param, 0, null, size) != CL_SUCCESS) {
            return null;
        }
        byte[] bytes = new byte[(int) size[0]];
        if (JoclCalls.clGetKernelArgInfo(kernel, index, param, bytes.length, Pointer.to(bytes), null) != CL_SUCCESS) {
            return null;
        }
        return cString(bytes);
    }

    private static String programString(cl_program program, int param) {
        long[] size = new long[1];
        OpenClCalls.check(JoclCalls.clGetProgramInfo(program, param, 0, null, size), "clGetProgramInfo");
        byte[] bytes = new byte[(int) size[0]];
        OpenClCalls.check(JoclCalls.clGetProgramInfo(program, param, bytes.length, Pointer.to(bytes), null), "clGetProgramInfo");
        return cString(bytes);
    }

    private static String buildLog(cl_program program, cl_device_id device) {
        long[] size = new long[1];
        if (JoclCalls.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, null, size) != CL_SUCCESS) {
            return "";
        }
        byte[] log = new byte[(int) size[0]];
        JoclCalls.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, log.length, Pointer.to(log), null);
        return cString(log);
    }

    private static String cString(byte[] bytes) {
        int end = 0;
        while (end < bytes.length && bytes[end] != 0) {
            end++;
        }
        return new String(bytes, 0, end, StandardCharsets.UTF_8).trim();
    }

    @Override
    public String toString() {
        return "OpenClKernel['" + name + "', " + parameterCount + " parameters]";
    }
}
