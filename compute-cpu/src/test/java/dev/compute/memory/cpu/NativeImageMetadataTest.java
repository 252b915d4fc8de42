package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.NativeImageMetadata;
import org.junit.jupiter.api.Test;

/** The GraalVM metadata in this jar registers a downcall for every signature {@link Posix} binds, and no other. */
class NativeImageMetadataTest {

    @Test
    void registersTheDowncallsPosixMakes() throws Exception {
        NativeImageMetadata metadata = NativeImageMetadata.of("dev.compute", "compute-cpu");

        assertThat(metadata.downcalls()).containsExactlyInAnyOrderElementsOf(NativeImageMetadata.staticHandleTypes(Posix.class));
        assertThat(metadata.resourceGlobs()).isEmpty();
    }
}
