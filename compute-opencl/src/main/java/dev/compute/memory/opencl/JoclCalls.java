package dev.compute.memory.opencl;

import java.nio.ByteBuffer;
import org.jocl.BuildProgramFunction;
import org.jocl.CL;
import org.jocl.CLException;
import org.jocl.CreateContextFunction;
import org.jocl.Pointer;
import org.jocl.cl_buffer_region;
import org.jocl.cl_command_queue;
import org.jocl.cl_context;
import org.jocl.cl_context_properties;
import org.jocl.cl_device_id;
import org.jocl.cl_event;
import org.jocl.cl_kernel;
import org.jocl.cl_mem;
import org.jocl.cl_platform_id;
import org.jocl.cl_program;
import org.jspecify.annotations.NullUnmarked;
import org.jspecify.annotations.Nullable;

/**
 * Every JOCL call the backend makes, each answering its OpenCL status whether or not the application has turned on
 * JOCL's exceptions. {@code CL.setExceptionsEnabled(true)}, the first line of most JOCL samples, is one switch for the
 * whole JVM: with it on, JOCL throws its {@link CLException} in place of every status but success, so a device out of
 * memory would not be the pool's signal to release its cache and retry, a build failure not a
 * {@code KernelCompileException}, a platform without devices not a platform passed over. Here the exception becomes
 * its status again (a call that creates something answers null and sets its error code), so the backend reads every
 * result alike with the switch on or off. No other class of the backend calls {@code CL}'s functions
 * ({@code JoclCallsTest} checks it). Null-unmarked: the arguments are JOCL's, which takes null where OpenCL does.
 */
@NullUnmarked
final class JoclCalls {
    private JoclCalls() {}

    static int clBuildProgram(cl_program program, int numDevices, cl_device_id[] deviceList, String options, BuildProgramFunction pfnNotify, Object userData) {
        try { return CL.clBuildProgram(program, numDevices, deviceList, options, pfnNotify, userData); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static @Nullable cl_mem clCreateBuffer(cl_context context, long flags, long size, Pointer hostPtr, int[] errcodeRet) {
        try { return CL.clCreateBuffer(context, flags, size, hostPtr, errcodeRet); } catch (CLException thrown) { return failed(errcodeRet, thrown); }
    }

    static @Nullable cl_command_queue clCreateCommandQueue(cl_context context, cl_device_id device, long properties, int[] errcodeRet) {
        try { return CL.clCreateCommandQueue(context, device, properties, errcodeRet); } catch (CLException thrown) { return failed(errcodeRet, thrown); }
    }

    static @Nullable cl_context clCreateContext(cl_context_properties properties, int numDevices, cl_device_id[] devices, CreateContextFunction pfnNotify, Object userData, int[] errcodeRet) {
        try { return CL.clCreateContext(properties, numDevices, devices, pfnNotify, userData, errcodeRet); } catch (CLException thrown) { return failed(errcodeRet, thrown); }
    }

    static @Nullable cl_kernel clCreateKernel(cl_program program, String kernelName, int[] errcodeRet) {
        try { return CL.clCreateKernel(program, kernelName, errcodeRet); } catch (CLException thrown) { return failed(errcodeRet, thrown); }
    }

    static @Nullable cl_program clCreateProgramWithSource(cl_context context, int count, String[] strings, long[] lengths, int[] errcodeRet) {
        try { return CL.clCreateProgramWithSource(context, count, strings, lengths, errcodeRet); } catch (CLException thrown) { return failed(errcodeRet, thrown); }
    }

    static @Nullable cl_mem clCreateSubBuffer(cl_mem buffer, long flags, int bufferCreateType, Pointer bufferCreateInfo, int[] errcodeRet) {
        try { return CL.clCreateSubBuffer(buffer, flags, bufferCreateType, bufferCreateInfo, errcodeRet); } catch (CLException thrown) { return failed(errcodeRet, thrown); }
    }

    static @Nullable cl_mem clCreateSubBuffer(cl_mem buffer, long flags, int bufferCreateType, cl_buffer_region bufferCreateInfo, int[] errcodeRet) {
        try { return CL.clCreateSubBuffer(buffer, flags, bufferCreateType, bufferCreateInfo, errcodeRet); } catch (CLException thrown) { return failed(errcodeRet, thrown); }
    }

    static @Nullable cl_event clCreateUserEvent(cl_context context, int[] errcodeRet) {
        try { return CL.clCreateUserEvent(context, errcodeRet); } catch (CLException thrown) { return failed(errcodeRet, thrown); }
    }

    static int clEnqueueBarrierWithWaitList(cl_command_queue commandQueue, int numEventsInWaitList, cl_event[] eventWaitList, cl_event event) {
        try { return CL.clEnqueueBarrierWithWaitList(commandQueue, numEventsInWaitList, eventWaitList, event); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clEnqueueCopyBuffer(cl_command_queue commandQueue, cl_mem srcBuffer, cl_mem dstBuffer, long srcOffset, long dstOffset, long cb, int numEventsInWaitList, cl_event[] eventWaitList, cl_event event) {
        try { return CL.clEnqueueCopyBuffer(commandQueue, srcBuffer, dstBuffer, srcOffset, dstOffset, cb, numEventsInWaitList, eventWaitList, event); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static @Nullable ByteBuffer clEnqueueMapBuffer(cl_command_queue commandQueue, cl_mem buffer, boolean blockingMap, long mapFlags, long offset, long cb, int numEventsInWaitList, cl_event[] eventWaitList, cl_event event, int[] errcodeRet) {
        try { return CL.clEnqueueMapBuffer(commandQueue, buffer, blockingMap, mapFlags, offset, cb, numEventsInWaitList, eventWaitList, event, errcodeRet); } catch (CLException thrown) { return failed(errcodeRet, thrown); }
    }

    static int clEnqueueMarker(cl_command_queue commandQueue, cl_event event) {
        try { return CL.clEnqueueMarker(commandQueue, event); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clEnqueueMarkerWithWaitList(cl_command_queue commandQueue, int numEventsInWaitList, cl_event[] eventWaitList, cl_event event) {
        try { return CL.clEnqueueMarkerWithWaitList(commandQueue, numEventsInWaitList, eventWaitList, event); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clEnqueueNDRangeKernel(cl_command_queue commandQueue, cl_kernel kernel, int workDim, long[] globalWorkOffset, long[] globalWorkSize, long[] localWorkSize, int numEventsInWaitList, cl_event[] eventWaitList, cl_event event) {
        try { return CL.clEnqueueNDRangeKernel(commandQueue, kernel, workDim, globalWorkOffset, globalWorkSize, localWorkSize, numEventsInWaitList, eventWaitList, event); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clEnqueueReadBuffer(cl_command_queue commandQueue, cl_mem buffer, boolean blockingRead, long offset, long cb, Pointer ptr, int numEventsInWaitList, cl_event[] eventWaitList, cl_event event) {
        try { return CL.clEnqueueReadBuffer(commandQueue, buffer, blockingRead, offset, cb, ptr, numEventsInWaitList, eventWaitList, event); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clEnqueueUnmapMemObject(cl_command_queue commandQueue, cl_mem memobj, ByteBuffer mappedPtr, int numEventsInWaitList, cl_event[] eventWaitList, cl_event event) {
        try { return CL.clEnqueueUnmapMemObject(commandQueue, memobj, mappedPtr, numEventsInWaitList, eventWaitList, event); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clEnqueueWriteBuffer(cl_command_queue commandQueue, cl_mem buffer, boolean blockingWrite, long offset, long cb, Pointer ptr, int numEventsInWaitList, cl_event[] eventWaitList, cl_event event) {
        try { return CL.clEnqueueWriteBuffer(commandQueue, buffer, blockingWrite, offset, cb, ptr, numEventsInWaitList, eventWaitList, event); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clFinish(cl_command_queue commandQueue) {
        try { return CL.clFinish(commandQueue); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clFlush(cl_command_queue commandQueue) {
        try { return CL.clFlush(commandQueue); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clGetDeviceIDs(cl_platform_id platform, long deviceType, int numEntries, cl_device_id[] devices, int[] numDevices) {
        try { return CL.clGetDeviceIDs(platform, deviceType, numEntries, devices, numDevices); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clGetDeviceInfo(cl_device_id device, int paramName, long paramValueSize, Pointer paramValue, long[] paramValueSizeRet) {
        try { return CL.clGetDeviceInfo(device, paramName, paramValueSize, paramValue, paramValueSizeRet); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clGetEventInfo(cl_event event, int paramName, long paramValueSize, Pointer paramValue, long[] paramValueSizeRet) {
        try { return CL.clGetEventInfo(event, paramName, paramValueSize, paramValue, paramValueSizeRet); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clGetKernelArgInfo(cl_kernel kernel, int argIndx, int paramName, long paramValueSize, Pointer paramValue, long[] paramValueSizeRet) {
        try { return CL.clGetKernelArgInfo(kernel, argIndx, paramName, paramValueSize, paramValue, paramValueSizeRet); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clGetKernelInfo(cl_kernel kernel, int paramName, long paramValueSize, Pointer paramValue, long[] paramValueSizeRet) {
        try { return CL.clGetKernelInfo(kernel, paramName, paramValueSize, paramValue, paramValueSizeRet); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clGetKernelWorkGroupInfo(cl_kernel kernel, cl_device_id device, int paramName, long paramValueSize, Pointer paramValue, long[] paramValueSizeRet) {
        try { return CL.clGetKernelWorkGroupInfo(kernel, device, paramName, paramValueSize, paramValue, paramValueSizeRet); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clGetPlatformIDs(int numEntries, cl_platform_id[] platforms, int[] numPlatforms) {
        try { return CL.clGetPlatformIDs(numEntries, platforms, numPlatforms); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clGetPlatformInfo(cl_platform_id platform, int paramName, long paramValueSize, Pointer paramValue, long[] paramValueSizeRet) {
        try { return CL.clGetPlatformInfo(platform, paramName, paramValueSize, paramValue, paramValueSizeRet); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clGetProgramBuildInfo(cl_program program, cl_device_id device, int paramName, long paramValueSize, Pointer paramValue, long[] paramValueSizeRet) {
        try { return CL.clGetProgramBuildInfo(program, device, paramName, paramValueSize, paramValue, paramValueSizeRet); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clGetProgramInfo(cl_program program, int paramName, long paramValueSize, Pointer paramValue, long[] paramValueSizeRet) {
        try { return CL.clGetProgramInfo(program, paramName, paramValueSize, paramValue, paramValueSizeRet); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clReleaseCommandQueue(cl_command_queue commandQueue) {
        try { return CL.clReleaseCommandQueue(commandQueue); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clReleaseContext(cl_context context) {
        try { return CL.clReleaseContext(context); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clReleaseEvent(cl_event event) {
        try { return CL.clReleaseEvent(event); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clReleaseKernel(cl_kernel kernel) {
        try { return CL.clReleaseKernel(kernel); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clReleaseMemObject(cl_mem memobj) {
        try { return CL.clReleaseMemObject(memobj); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clReleaseProgram(cl_program program) {
        try { return CL.clReleaseProgram(program); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clRetainEvent(cl_event event) {
        try { return CL.clRetainEvent(event); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static @Nullable Pointer clSVMAlloc(cl_context context, long flags, long size, int alignment) {
        try { return CL.clSVMAlloc(context, flags, size, alignment); } catch (CLException thrown) { return null; }
    }

    static void clSVMFree(cl_context context, Pointer svmPointer) {
        CL.clSVMFree(context, svmPointer);
    }

    static int clSetKernelArg(cl_kernel kernel, int argIndex, long argSize, Pointer argValue) {
        try { return CL.clSetKernelArg(kernel, argIndex, argSize, argValue); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clSetKernelArgSVMPointer(cl_kernel kernel, int argIndex, Pointer argValue) {
        try { return CL.clSetKernelArgSVMPointer(kernel, argIndex, argValue); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clSetUserEventStatus(cl_event event, int executionStatus) {
        try { return CL.clSetUserEventStatus(event, executionStatus); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    static int clWaitForEvents(int numEvents, cl_event[] eventList) {
        try { return CL.clWaitForEvents(numEvents, eventList); } catch (CLException thrown) { return thrown.getStatus(); }
    }

    /** A create call that failed: its error code where the caller reads it, and no object. */
    private static <T> @Nullable T failed(int @Nullable [] errorCode, CLException thrown) {
        if (errorCode != null && errorCode.length > 0) {
            errorCode[0] = thrown.getStatus();
        }
        return null;
    }
}
