package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.NativeImageMetadata;
import java.lang.foreign.Arena;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The GraalVM metadata in this jar registers the op set's PTX and a downcall for every signature
 * {@link DriverLibrary} binds, and no other. The handles come from the stand-in driver, which has every symbol.
 */
class NativeImageMetadataTest {

    @Test
    void registersTheOpSetsPtx() throws Exception {
        NativeImageMetadata metadata = NativeImageMetadata.of("dev.compute", "compute-cuda");

        assertThat(metadata.resourceGlobs()).containsExactly(CudaKernelOps.PTX.substring(1));
        assertThat(CudaKernelOps.class.getResource(CudaKernelOps.PTX)).isNotNull();
    }

    @Test
    void registersTheDowncallsTheDriverLibraryMakes(@TempDir Path directory) throws Exception {
        NativeImageMetadata metadata = NativeImageMetadata.of("dev.compute", "compute-cuda");
        // not named libcuda.so.1: loaded into this JVM under that name, it would answer other tests' probes for a driver
        Path library = FakeDriverLibrary.compile(directory, "libfakecuda-metadata.so");
        try (Arena arena = Arena.ofConfined()) {
            DriverLibrary driver = DriverLibrary.open(library, arena);

            assertThat(metadata.downcalls()).containsExactlyInAnyOrderElementsOf(NativeImageMetadata.handleTypes(driver));
        }
    }
}
