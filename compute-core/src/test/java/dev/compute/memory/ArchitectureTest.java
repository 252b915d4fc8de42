package dev.compute.memory;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;
import static org.assertj.core.api.Assertions.assertThat;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The layers of the core, as the tree shows them: {@code dev.compute.memory} holds what users hold and the manager's
 * front door, which composes the parts of {@code manager} and {@code lifetime}; below them the resources, the pool,
 * the backend SPI and the shared utilities. A lower layer never reaches back up to the front door (the manager, the
 * buffer handle, the builder, the ops); the API's values (locations, types, states, statistics, exceptions, the
 * listener and handler interfaces) are the vocabulary every layer speaks. And no other module reaches into the
 * internal packages.
 */
class ArchitectureTest {

    /** What users call and the manager's front door: only the API package itself may name them. */
    private static final String[] FRONT_DOOR = {
            "dev.compute.memory.UnifiedMemoryManager", "dev.compute.memory.UnifiedMemoryManagerBuilder",
            "dev.compute.memory.UnifiedBuffer", "dev.compute.memory.BufferAccess", "dev.compute.memory.MemoryBudget",
            "dev.compute.memory.ComputeOps", "dev.compute.memory.PooledMemoryManager", "dev.compute.memory.BackendComputeOps"};

    private static JavaClasses core;

    @BeforeAll
    static void importCore() {
        core = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS).importPackages("dev.compute.memory");
    }

    @Test
    void noLowerLayerReachesBackUpToTheFrontDoor() {
        noClasses().that().resideOutsideOfPackage("dev.compute.memory")
                .should().dependOnClassesThat().haveFullyQualifiedName(FRONT_DOOR[0])
                .orShould().dependOnClassesThat().haveFullyQualifiedName(FRONT_DOOR[1])
                .orShould().dependOnClassesThat().haveFullyQualifiedName(FRONT_DOOR[2])
                .orShould().dependOnClassesThat().haveFullyQualifiedName(FRONT_DOOR[3])
                .orShould().dependOnClassesThat().haveFullyQualifiedName(FRONT_DOOR[4])
                .orShould().dependOnClassesThat().haveFullyQualifiedName(FRONT_DOOR[5])
                .orShould().dependOnClassesThat().haveFullyQualifiedName(FRONT_DOOR[6])
                .orShould().dependOnClassesThat().haveFullyQualifiedName(FRONT_DOOR[7])
                .check(core);
    }

    @Test
    void theSubpackagesFormNoImportCircle() {
        slices().matching("dev.compute.memory.(*)..").should().beFreeOfCycles().check(core);
    }

    @Test
    void aBuffersLifeKnowsTheManagerOnlyThroughItsPort() {
        noClasses().that().resideInAPackage("dev.compute.memory.lifetime..")
                .should().dependOnClassesThat().resideInAPackage("dev.compute.memory.manager..").check(core);
    }

    @Test
    void theResourcesAndTheSpiKnowNothingOfTheManagersParts() {
        noClasses().that().resideInAnyPackage("dev.compute.memory.resource..", "dev.compute.memory.spi..", "dev.compute.memory.internal..",
                        "dev.compute.memory.recording..", "dev.compute.memory.jfr..", "dev.compute.memory.simulated..")
                .should().dependOnClassesThat().resideInAnyPackage("dev.compute.memory.manager..", "dev.compute.memory.lifetime..")
                .check(core);
    }

    /**
     * The backends, the starter, its test support, the samples and the benchmarks use the API, the resources and the
     * SPI, never the manager's parts: their sources import nothing from {@code manager} or {@code lifetime}.
     */
    @Test
    void noOtherModuleImportsTheInternalParts() throws IOException {
        Path root = Path.of("..").toAbsolutePath().normalize();
        Pattern internal = Pattern.compile("^import (static )?dev\\.compute\\.memory\\.(manager|lifetime)\\.", Pattern.MULTILINE);
        List<String> offenders = new ArrayList<>();
        List<Path> sources;
        try (Stream<Path> files = Files.walk(root, 12)) {
            sources = files.filter(file -> file.toString().endsWith(".java"))
                    .filter(file -> file.toString().contains("/src/"))
                    .filter(file -> !file.startsWith(root.resolve("compute-core")))
                    .filter(file -> !file.toString().contains("/target/"))
                    .toList();
        }
        for (Path source : sources) {
            if (internal.matcher(Files.readString(source)).find()) {
                offenders.add(root.relativize(source).toString());
            }
        }
        assertThat(sources).as("the other modules' sources were found").hasSizeGreaterThan(50);
        assertThat(offenders).as("sources outside compute-core that import dev.compute.memory.manager or .lifetime").isEmpty();
    }
}
