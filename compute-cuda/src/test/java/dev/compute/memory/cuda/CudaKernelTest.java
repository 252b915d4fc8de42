package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.ComputeKernel;
import dev.compute.memory.DataType;
import dev.compute.memory.KernelArg;
import dev.compute.memory.KernelCompileException;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.KernelContractTest;
import dev.compute.memory.spi.BackendSettings;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What the CUDA backend adds to the kernel contract ({@link CudaKernelContractTest}) on a real GPU: the JIT's log in a
 * refused PTX, launches checked against the PTX's parameters, HOST memory refused by name, a close right after a launch
 * on host-visible memory, and the native device. Skips with the reason where there is no GPU.
 */
class CudaKernelTest {

    static final String SLOW_FILL_PTX = resource("/dev/compute/memory/cuda/kernel-api-test.ptx");
    /** Well-formed up to an instruction no GPU has: the driver's JIT refuses it. */
    static final String BROKEN_PTX = """
            .version 8.0
            .target sm_70
            .address_size 64
            .visible .entry broken(.param .u64 broken_param_0)
            {
                bogus_instruction;
                ret;
            }
            """;

    private UnifiedMemoryManager manager;

    @BeforeEach
    void open() {
        manager = CudaTestSupport.managerOn(CudaTestSupport.openBackend(BackendSettings.ofDevice(0))).build();
    }

    @AfterEach
    void close() {
        if (manager != null) {
            manager.close();
        }
    }

    @Test
    void aRefusedPtxCarriesTheJitsLogAndAMissingEntryNamesTheOnesThere() {
        assertThatThrownBy(() -> manager.kernels().compile(KernelSource.ptx(BROKEN_PTX, "broken")))
                .isInstanceOfSatisfying(KernelCompileException.class, e -> {
                    assertThat(e.getMessage()).contains("loading the PTX of PTX function 'broken' on CUDA device 0 failed", "CUDA_ERROR_INVALID_PTX");
                    assertThat(e.buildLog()).contains("bogus_instruction");
                });
        assertThatThrownBy(() -> manager.kernels().compile(KernelSource.ptx(KernelContractTest.PTX, "affine_typo")))
                .isInstanceOf(KernelCompileException.class)
                .hasMessage("PTX function 'affine_typo' is not in the PTX given: its .entry functions are [affine, scale_in_place, iota2d, clamp_f64]"
                        + " (a C++ function's PTX name is mangled unless it is declared extern \"C\")");
    }

    @Test
    void launchesAreCheckedAgainstThePtxsParameters() {
        ComputeKernel affine = manager.kernels().compile(KernelSource.ptx(KernelContractTest.PTX, "affine"));
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 4); UnifiedBuffer y = manager.allocate(DataType.FLOAT32, 4);
             UnifiedBuffer host = manager.allocate(DataType.FLOAT32, 4, MemoryLocation.HOST)) {
            assertThatThrownBy(() -> affine.launch(LaunchShape.of(4), x, y, 4L, 1f, 1.0))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("kernel 'affine' takes 6 argument(s) (its PTX .entry's parameters); the launch passed 5");
            assertThatThrownBy(() -> affine.launch(LaunchShape.of(4), x, y, 4L, 1.0, 1.0, 1))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("kernel 'affine', argument 3 (a Double 1.0): the PTX parameter 3 is a float (.f32); pass a Float");
            assertThatThrownBy(() -> affine.launch(LaunchShape.of(4), x, y, 4, 1f, 1.0, 1))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("argument 2 (an Integer 4): the PTX parameter 2 is a 64-bit integer or pointer");
            assertThatThrownBy(() -> affine.launch(LaunchShape.of(4), host, y, 4L, 1f, 1.0, 1))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("kernel 'affine', argument 0 (UnifiedBuffer[HOST")
                    .hasMessageContaining("HOST memory is ordinary off-heap memory, which a CUDA kernel cannot reach");
        }
    }

    @Test
    void aCloseRightAfterTheLaunchFreesTheMemoryOnlyAfterTheKernel() throws Exception {
        ComputeKernel slowFill = manager.kernels().compile(KernelSource.ptx(SLOW_FILL_PTX, "slow_fill"));
        int n = 4096;
        for (MemoryLocation location : List.of(MemoryLocation.PINNED, MemoryLocation.UNIFIED)) {
            if (!manager.locations().contains(location)) {
                continue;
            }
            UnifiedBuffer first = manager.allocate(DataType.FLOAT32, n, location);
            long firstAddress = first.readOnlyHostView().address();
            CompletableFuture<Void> running = slowFill.launch(LaunchShape.of(n), KernelArg.write(first), (long) n, 7f, 1_000_000_000L);
            first.close();
            try (UnifiedBuffer next = manager.allocate(DataType.FLOAT32, n, location)) {
                float[] ones = new float[n];
                Arrays.fill(ones, 1f);
                next.copyFrom(ones); // by the host: it does not queue behind the kernel
                assertThat(running).as("%s: the kernel is still running, so this test can tell", location).isNotDone();
                assertThat(next.readOnlyHostView().address()).as("%s: the closed buffer's block waits for its kernel", location)
                        .isNotEqualTo(firstAddress);
                running.get(60, TimeUnit.SECONDS);
                float[] result = new float[n];
                next.copyTo(result);
                assertThat(result).as("%s: the kernel wrote only the closed buffer's memory", location).containsOnly(1f);
            }
        }
    }

    @Test
    void theNativeDeviceIsTheContextAndTheCallingThreadsStream() {
        CudaNativeDevice cuda = manager.nativeDevice(CudaNativeDevice.class);
        assertThat(cuda.deviceOrdinal()).isZero();
        assertThat(cuda.context()).isNotNull();
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 16); BufferAccess access = buffer.deviceAccess(AccessMode.READ)) {
            assertThat(cuda.stream()).isSameAs(access.handle(CudaDeviceHandle.class).stream());
        }
        manager.close();
        assertThatThrownBy(cuda::stream).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
    }

    static String resource(String name) {
        try (InputStream in = CudaKernelTest.class.getResourceAsStream(name)) {
            if (in == null) {
                throw new IllegalStateException(name + " is missing from the test class path");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
