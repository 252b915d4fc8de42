package dev.compute.memory.cuda;

import static jcuda.driver.JCudaDriver.cuLaunchKernel;
import static jcuda.driver.JCudaDriver.cuModuleGetFunction;
import static jcuda.driver.JCudaDriver.cuModuleLoadData;
import static jcuda.driver.JCudaDriver.cuModuleUnload;
import static jcuda.driver.JCudaDriver.cuStreamSynchronize;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.ComputeKernel;
import dev.compute.memory.DataType;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.KernelContractTest;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.testing.LaunchRounds;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import jcuda.Pointer;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmodule;
import jcuda.driver.CUstream;

/**
 * What a launch through the kernel API costs against the same launch in raw JCuda, on a GPU: {@code x[i] *= a} over
 * 4096 floats of DEVICE memory ({@code scale_in_place} of the kernel contract), on the calling thread's stream in both
 * cases. Run on the GPU machine with {@code run-main.sh dev.compute.memory.cuda.CudaKernelLaunchTiming}; prints the
 * median of several rounds, in microseconds a launch, for launches waited for one by one and for ten queued back to back.
 */
public final class CudaKernelLaunchTiming {

    private static final int N = 4096;

    public static void main(String[] args) {
        try (UnifiedMemoryManager manager = CudaTestSupport.managerOn(
                (CudaBackend) new CudaBackendProvider().create(BackendSettings.ofDevice(0))).build();
             UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N)) {
            x.copyFrom(new float[N]);
            ComputeKernel kernel = manager.kernels().compile(KernelSource.ptx(KernelContractTest.PTX, "scale_in_place"));
            CudaNativeDevice cuda = manager.nativeDevice(CudaNativeDevice.class);
            CUstream stream = cuda.stream();
            CUmodule module = new CUmodule();
            byte[] text = KernelContractTest.PTX.getBytes(StandardCharsets.UTF_8);
            CudaResults.check(cuModuleLoadData(module, Arrays.copyOf(text, text.length + 1)), "cuModuleLoadData");
            CUfunction function = new CUfunction();
            CudaResults.check(cuModuleGetFunction(function, module, "scale_in_place"), "cuModuleGetFunction");
            long address;
            try (BufferAccess access = x.deviceAccess(AccessMode.READ)) {
                address = access.handle(CudaDeviceHandle.class).address();
            }
            // the raw launches use x's address outside an access: this program keeps x open and orders nothing else on it
            Runnable raw = () -> rawLaunch(function, stream, address);
            Runnable rawAndSync = () -> {
                rawLaunch(function, stream, address);
                CudaResults.check(cuStreamSynchronize(stream), "cuStreamSynchronize");
            };
            Runnable accessByHand = () -> {
                try (BufferAccess access = x.deviceAccess(AccessMode.READ_WRITE)) {
                    CudaDeviceHandle handle = access.handle(CudaDeviceHandle.class);
                    rawLaunch(function, handle.stream(), handle.address());
                }
                CudaResults.check(cuStreamSynchronize(stream), "cuStreamSynchronize");
            };
            Runnable apiAndJoin = () -> kernel.launch(LaunchShape.of(N), x, (long) N, 1.0f).join();
            Runnable raw10 = () -> {
                for (int i = 0; i < 10; i++) {
                    raw.run();
                }
                CudaResults.check(cuStreamSynchronize(stream), "cuStreamSynchronize");
            };
            Runnable api10 = () -> {
                CompletableFuture<Void> last = null;
                for (int i = 0; i < 10; i++) {
                    last = kernel.launch(LaunchShape.of(N), x, (long) N, 1.0f);
                }
                last.join();
            };
            System.out.println("device: " + manager.backendInfo());
            System.out.printf("%-44s %12s%n", "launch of scale_in_place over 4096 floats", "us/launch");
            LaunchRounds.report("raw cuLaunchKernel + cuStreamSynchronize", rawAndSync, 1);
            LaunchRounds.report("device access by hand + raw launch + sync", accessByHand, 1);
            LaunchRounds.report("kernel.launch(...).join()", apiAndJoin, 1);
            LaunchRounds.report("raw: 10 launches, then sync", raw10, 10);
            LaunchRounds.report("kernel.launch x 10, then join the last", api10, 10);
            CudaResults.check(cuModuleUnload(module), "cuModuleUnload");
        }
    }

    private static void rawLaunch(CUfunction function, CUstream stream, long address) {
        Pointer parameters = Pointer.to(Pointer.to(new long[] {address}), Pointer.to(new long[] {N}), Pointer.to(new float[] {1.0f}));
        CudaResults.check(cuLaunchKernel(function, (N + 255) / 256, 1, 1, 256, 1, 1, 0, stream, parameters, null), "cuLaunchKernel");
    }
}
