package dev.compute.memory.opencl;

import static org.jocl.CL.CL_MEM_OBJECT_ALLOCATION_FAILURE;
import static org.jocl.CL.CL_OUT_OF_HOST_MEMORY;
import static org.jocl.CL.CL_OUT_OF_RESOURCES;
import static org.jocl.CL.CL_SUCCESS;

import dev.compute.memory.spi.BackendOutOfMemoryException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_device_id;
import org.jocl.cl_platform_id;
import org.jspecify.annotations.Nullable;

/**
 * Small helpers around JOCL: error codes to exceptions, info queries, and JOCL pointers at native addresses.
 * Every call's code is checked here, whatever JOCL's global exception mode is: the calls go through
 * {@link JoclCalls}, which answers a code with the mode on too.
 */
final class OpenClCalls {
    private OpenClCalls() {}

    /** Throws unless {@code code} is {@code CL_SUCCESS}; the three out-of-memory codes become {@link BackendOutOfMemoryException}. */
    static void check(int code, String what) {
        if (code != CL_SUCCESS) {
            throw failure(code, what);
        }
    }

    /** The exception for a failed call or command: out-of-memory codes become {@link BackendOutOfMemoryException}. */
    static RuntimeException failure(int code, String what) {
        if (isOutOfMemory(code)) {
            return new BackendOutOfMemoryException(what + " failed: " + CL.stringFor_errorCode(code)
                    + " (OpenCL allocates lazily, so this may be the first use of memory allocated earlier)");
        }
        return new OpenClException(what, code);
    }

    static boolean isOutOfMemory(int code) {
        return code == CL_MEM_OBJECT_ALLOCATION_FAILURE || code == CL_OUT_OF_RESOURCES || code == CL_OUT_OF_HOST_MEMORY;
    }

    /**
     * A JOCL pointer at a native address. JOCL takes a direct buffer's address and adds the pointer's byte
     * offset without looking at the buffer's capacity, so a one-byte view of the address reaches any length.
     */
    static Pointer pointerAt(long address) {
        return Pointer.to(MemorySegment.ofAddress(address).reinterpret(1).asByteBuffer());
    }

    /** The native address behind a JOCL direct buffer or a pointer returned by OpenCL. */
    static long addressOf(ByteBuffer direct) {
        return MemorySegment.ofBuffer(direct).address();
    }

    static String platformString(cl_platform_id platform, int param) {
        long[] size = new long[1];
        check(JoclCalls.clGetPlatformInfo(platform, param, 0, null, size), "clGetPlatformInfo");
        byte[] bytes = new byte[(int) size[0]];
        check(JoclCalls.clGetPlatformInfo(platform, param, bytes.length, Pointer.to(bytes), null), "clGetPlatformInfo");
        return cString(bytes);
    }

    static String deviceString(cl_device_id device, int param) {
        long[] size = new long[1];
        check(JoclCalls.clGetDeviceInfo(device, param, 0, null, size), "clGetDeviceInfo");
        byte[] bytes = new byte[(int) size[0]];
        check(JoclCalls.clGetDeviceInfo(device, param, bytes.length, Pointer.to(bytes), null), "clGetDeviceInfo");
        return cString(bytes);
    }

    /** An unsigned integer property of any width up to 8 bytes (cl_uint, cl_ulong, size_t, bitfields). */
    static long deviceLong(cl_device_id device, int param) {
        long[] size = new long[1];
        check(JoclCalls.clGetDeviceInfo(device, param, 0, null, size), "clGetDeviceInfo");
        ByteBuffer value = ByteBuffer.allocate(8).order(ByteOrder.nativeOrder());
        check(JoclCalls.clGetDeviceInfo(device, param, size[0], Pointer.to(value.array()), null), "clGetDeviceInfo");
        return size[0] == 4 ? Integer.toUnsignedLong(value.getInt(0)) : value.getLong(0);
    }

    /** As {@link #deviceLong}, or {@code fallback} where the device does not know the property (an older OpenCL version). */
    static long deviceLongOr(cl_device_id device, int param, long fallback) {
        long[] size = new long[1];
        if (JoclCalls.clGetDeviceInfo(device, param, 0, null, size) != CL_SUCCESS) {
            return fallback;
        }
        return deviceLong(device, param);
    }

    /**
     * The most work items a work-group may have in each dimension ({@code CL_DEVICE_MAX_WORK_ITEM_SIZES}, one size_t per
     * dimension); null where the device cannot say.
     */
    static long @Nullable [] maxWorkItemSizes(cl_device_id device) {
        long[] size = new long[1];
        if (JoclCalls.clGetDeviceInfo(device, CL.CL_DEVICE_MAX_WORK_ITEM_SIZES, 0, null, size) != CL_SUCCESS || size[0] < Sizeof.size_t) {
            return null;
        }
        long[] sizes = new long[(int) (size[0] / Sizeof.size_t)];
        return JoclCalls.clGetDeviceInfo(device, CL.CL_DEVICE_MAX_WORK_ITEM_SIZES, size[0], Pointer.to(sizes), null) == CL_SUCCESS ? sizes : null;
    }

    private static String cString(byte[] bytes) {
        int end = 0;
        while (end < bytes.length && bytes[end] != 0) {
            end++;
        }
        return new String(bytes, 0, end, StandardCharsets.UTF_8).trim();
    }
}
